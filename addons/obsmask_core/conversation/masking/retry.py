"""A retry answered again: the same bytes as a kept request, under the same
policy, finding the same in the table of when conversations were last seen,
get the kept answer without being planned, spliced or checked again.

A client sends the same body again after a timeout, an error or an
interrupted stream, and an SDK does so on its own; planning depends on
nothing else (``records.KeptAnswer``), so the answer is the same. The
table is still visited, as it is for any request: what it says may have
changed (the cache expired meanwhile, or the provider's brake stopped the
conversation), and then the request is planned anew."""

from __future__ import annotations

from obsmask_core.conversation.billing.last_seen import Arrival
from obsmask_core.conversation.masking.outcomes import Masked, Unchanged
from obsmask_core.conversation.masking.sighting import sighting_of
from obsmask_core.conversation.reuse.records import Grown
from obsmask_core.conversation.settings.policy import MaskPolicy


def answer_again(grown: Grown, policy: MaskPolicy,
                 visit: Arrival | None) -> Masked | Unchanged | None:
    """The kept answer when ``grown`` is its request's bytes again and
    nothing planning depends on changed; None: plan anew."""
    answer = grown.previous.answer
    if answer is None or grown.kept is not None or grown.start != grown.end \
            or answer.policy is not policy or answer.with_table != (visit is not None):
        return None
    if answer.visit is not None and visit is not None \
            and sighting_of(visit, answer.visit, policy) != answer.sighting:
        return None
    if answer.masked is None:
        return Unchanged(answer.unchanged, answer.plan)
    return Masked(answer.masked, answer.plan, *answer.tool_chars, reused=True)
