"""One session's figures for bench_cache: per line (a model family under
one reading of its cache, ``obsmask_core.offline.cache.families``) and
policy, the bill, its final ratio to the baseline's on the same line, and
its worst ratio so far (``obsmask_core.offline.cache.so_far``).

(``figures`` keeps the figures per price model of the ``price_model``
setting, for ``obsmask measure``'s tests and bench_refetch.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired, TypedDict

from benchlib.cache.figures import ratio, round_ratio
from benchlib.cache.policies import BASELINE
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.offline.cache.block_tokens import MessageTokens
from obsmask_core.offline.cache.families import FAMILIES, Family
from obsmask_core.offline.cache.family_replay import FamilyRun, LineRun, replay_families
from obsmask_core.offline.cache.sessions import Session
from obsmask_core.offline.cache.so_far import ratio_so_far, worst_so_far


class LinePolicyFigures(TypedDict):
    """One policy on one line of one session, as the JSON output gives it."""

    cost: float  # in input tokens at the base price
    cached_tokens: int  # read from the line's cache
    ratio: float | None  # to the baseline's cost on the same line
    # The highest ratio of the bill so far, from request FIRST_JUDGED_REQUEST
    # on, and the number of that request (from 1); None: too few requests.
    worst_prefix_ratio: float | None
    worst_prefix_request: int | None
    # Tool-turn count -> the bill so far after the request holding that
    # turn's result (only for sessions with checkpoints).
    ratio_at_tool_turns: NotRequired[dict[str, float | None]]
    masked_results_last_request: int
    tool_results_last_request: int
    input_tokens_last_request: int
    # The rewrite's outcomes (masked, unchanged, refused, unreadable) of the
    # run that fed this line (for a policy that does not read the model, the
    # one run that feeds every line of the session).
    outcomes: dict[str, int]
    # Forwarded bodies with more than four breakpoints, and those with a
    # client's breakpoint moved or removed.
    protocol_errors: dict[str, int]


class FamilySessionFigures(TypedDict):
    name: str
    kind: str
    format: str
    requests: int
    messages: int
    # line -> policy -> figures; only the lines of the families of its format.
    lines: dict[str, dict[str, LinePolicyFigures]]


def _policy_figures(session: Session, run: FamilyRun, line: LineRun,
                    base: LineRun) -> LinePolicyFigures:
    worst = worst_so_far(line.so_far, base.so_far)
    figures: LinePolicyFigures = {
        "cost": round(line.cost, 1),
        "cached_tokens": line.read,
        "ratio": round_ratio(ratio(line.cost, base.cost)),
        "worst_prefix_ratio": round_ratio(worst[0]) if worst else None,
        "worst_prefix_request": worst[1] if worst else None,
        "masked_results_last_request": run.masked_last_request,
        "tool_results_last_request": run.tool_results_last_request,
        "input_tokens_last_request": run.input_tokens_last_request,
        "outcomes": dict(run.outcomes),
        "protocol_errors": {
            "over_four_breakpoints": run.protocol_errors.over_four_breakpoints,
            "client_breakpoint_moved_or_removed":
                run.protocol_errors.client_breakpoint_moved_or_removed,
        },
    }
    if session.checkpoints:
        # Every answer of these sessions is one tool turn and the first
        # request holds none, so request k + 1 (index k) is the first to hold
        # turn k's result: the last request of the k-turn session.
        figures["ratio_at_tool_turns"] = {
            str(turns): round_ratio(ratio_so_far(line.so_far, base.so_far, turns))
            for turns in session.checkpoints if turns < len(session.request_ends)
        }
    return figures


def family_session_figures(session: Session, policies: dict[str, MaskPolicy],
                           tokens: MessageTokens,
                           families: Sequence[Family] = FAMILIES) -> FamilySessionFigures:
    """Every policy's bill on ``session`` under each line of its families,
    and its ratios to the baseline's on the same line."""
    runs = replay_families(session, policies, tokens, families)
    return {"name": session.name, "kind": session.kind, "format": session.fmt.name,
            "requests": len(session.request_ends), "messages": len(session.messages),
            "lines": {
                line: {name: _policy_figures(session, run, run.lines[line],
                                             by_policy[BASELINE].lines[line])
                       for name, run in by_policy.items()}
                for line, by_policy in runs.items()}}
