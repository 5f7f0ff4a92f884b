"""The bill so far: after each request, the cost of the requests up to it
under a policy over the same for the baseline.

A session's final ratio can hide a stretch where masking costs more than no
masking (a move of the frontier re-bills the history after it at once; what
it frees is only saved on later requests). An agent can stop at any request,
so the bill must not go up at any point: the worst ratio so far, from
request ``FIRST_JUDGED_REQUEST`` on (the first requests are a few thousand
tokens, where a ratio says little), is kept per session, policy and price
model, with its request number (counted from 1).
"""

from __future__ import annotations

from collections.abc import Sequence

FIRST_JUDGED_REQUEST = 8  # request numbers count from 1: index 7 and later


def ratio_so_far(costs: Sequence[float], baseline: Sequence[float], index: int) -> float | None:
    """Cumulative cost after request ``index`` (from 0) over the baseline's."""
    return costs[index] / baseline[index] if baseline[index] else None


def worst_so_far(costs: Sequence[float], baseline: Sequence[float],
                 first: int = FIRST_JUDGED_REQUEST) -> tuple[float, int] | None:
    """(the highest ratio so far after request ``first`` or a later one, the
    number of the first request where it is reached); None when the session
    has fewer requests (or the baseline has cost nothing)."""
    worst: tuple[float, int] | None = None
    for index in range(first - 1, min(len(costs), len(baseline))):
        value = ratio_so_far(costs, baseline, index)
        if value is not None and (worst is None or value > worst[0]):
            worst = (value, index + 1)
    return worst
