"""A conversation's bill so far under each price model, with and without
masking, by the cache benchmark's own code.

The conversation's requests as the client sent them (the originals) are
replayed by ``obsmask_core.offline.cache.replay``: each request masked as the proxy
would mask it under the chosen policy (or not at all, for the bill without
masking), and billed against the previous request of the same replay under
the cache and price rules of ``obsmask_core.offline.cache.billing``. The replay needs each
request to be the previous one plus new items; where a client rewrote its
history (compaction, an edited message), the replay starts again there, as
a new run whose first request shares nothing with the one before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.offline.cache.billing import SETTINGS_MODELS, model_description
from obsmask_core.offline.cache.block_tokens import MessageTokens
from obsmask_core.offline.cache.replay import replay
from obsmask_core.offline.cache.sessions import Session, same_item
from obsmask_core.offline.report.conversations import ParsedBody

NO_MASKING = MaskPolicy(enabled=False)


@dataclass(frozen=True)
class ModelBill:
    """The cost so far after each billed request, in input tokens at the
    model's base price (1 = one input token without a cache)."""

    name: str  # as the price_model setting names it
    description: str
    without_masking: tuple[float, ...]
    with_masking: tuple[float, ...]


@dataclass(frozen=True)
class ConversationBill:
    request_numbers: tuple[int, ...]  # the conversation's requests billed, in order
    models: tuple[ModelBill, ...]
    # Requests (numbers) whose list does not continue the previous one's:
    # the replay starts a new run there.
    restarts: tuple[int, ...]
    # In the holdout group (holdout_percent): unmasked, its two bills equal.
    held_out: bool = False


NumberedBody = tuple[int, ParsedBody]


def continues(earlier: ParsedBody, later: ParsedBody) -> bool:
    """Does ``later`` begin with the whole of ``earlier`` (its preamble and
    every item), cache breakpoints aside? Clients move those from request
    to request (``sessions.same_item`` says how)."""
    return (same_item(earlier.preamble, later.preamble)
            and len(later.items) >= len(earlier.items)
            and all(map(same_item, earlier.items, later.items)))


def growing_runs(bodies: Sequence[NumberedBody]) -> list[list[NumberedBody]]:
    """The requests cut where one does not continue the previous one."""
    runs: list[list[NumberedBody]] = []
    for number, body in bodies:
        if runs and continues(runs[-1][-1][1], body):
            runs[-1].append((number, body))
        else:
            runs.append([(number, body)])
    return runs


def bill_conversation(bodies: Sequence[NumberedBody], fmt: WireFormat, policy: MaskPolicy,
                      tokens: MessageTokens) -> ConversationBill | None:
    """The bill so far of the requests ``bodies`` (number, original body);
    None when there is none."""
    runs = growing_runs(bodies)
    if not runs:
        return None
    without: dict[str, list[float]] = {model.name: [] for model in SETTINGS_MODELS}
    with_masking: dict[str, list[float]] = {model.name: [] for model in SETTINGS_MODELS}
    for number, run in enumerate(runs, start=1):
        last = run[-1][1]
        session = Session(f"run {number}", "input", last.items,
                          request_ends=[len(body.items) for _, body in run], fmt=fmt,
                          preamble=last.preamble, members=last.members)
        originals = [tokens.segment(item) for item in session.messages]
        for sums, run_policy in ((without, NO_MASKING), (with_masking, policy)):
            so_far = replay(session, run_policy, tokens, originals).bill.so_far
            for name, costs in sums.items():
                # A new run adds its own bill so far to what came before it.
                carried = costs[-1] if costs else 0.0
                costs.extend(carried + cost for cost in so_far[name])
    models = tuple(
        ModelBill(model.name, model_description(model),
                  tuple(without[model.name]), tuple(with_masking[model.name]))
        for model in SETTINGS_MODELS
    )
    return ConversationBill(
        request_numbers=tuple(number for run in runs for number, _ in run),
        models=models,
        restarts=tuple(run[0][0] for run in runs[1:]),
    )
