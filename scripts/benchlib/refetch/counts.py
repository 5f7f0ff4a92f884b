"""One session's repeats and re-fetches, read from its last request.

The shared sessions were recorded without masking: the model saw every
result whole, so none of its repeats was caused by masking. Each repeat is
counted as the detection reads it (``conversation.refetch``): after a call
that may have changed something, or not. A detection on these sessions
(a repeat whose earlier result obsmask would have masked by then) is a
natural repeat the detection cannot tell apart: its false alarm rate.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypedDict

from obsmask_core.conversation.frontier.refetch import count_repeats
from obsmask_core.conversation.masking.outcomes import Masked, Unchanged
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.offline.cache.clients import ClientRequests
from obsmask_core.offline.cache.sessions import Session


class SessionCounts(TypedDict):
    name: str
    format: str
    calls: int
    # Calls with an earlier call of the same tool and arguments.
    repeats: int
    repeats_after_a_change: int
    repeats_with_nothing_changed: int
    # With the policy: the repeats it reads as re-fetches (all natural
    # here), and the results its guard keeps in the last request.
    detections: int
    guard_detections: int
    guard_kept_results: int


def session_counts(session: Session, policy: MaskPolicy) -> SessionCounts:
    requests = ClientRequests(session)
    sent = requests.request(len(session.messages))
    items = sent.request.items
    repeats = count_repeats(session.fmt.index(items), items)
    detections = _plan_refetches(sent.body, policy, session)
    guarded = _plan_refetches(sent.body, replace(policy, refetch_guard=True), session)
    return {
        "name": session.name, "format": session.fmt.name,
        "calls": repeats.calls,
        "repeats": repeats.repeats_seen + repeats.repeats_after_change,
        "repeats_after_a_change": repeats.repeats_after_change,
        "repeats_with_nothing_changed": repeats.repeats_seen,
        "detections": detections[0],
        "guard_detections": guarded[0],
        "guard_kept_results": guarded[1],
    }


def _plan_refetches(body: bytes, policy: MaskPolicy, session: Session) -> tuple[int, int]:
    """(re-fetches in the conversation, results the guard keeps) of the
    last request, as the proxy plans it."""
    outcome = mask_request_body(body, policy, session.fmt)
    if not isinstance(outcome, Masked | Unchanged) or outcome.plan is None:
        return 0, 0
    found = outcome.plan.refetches
    return found.in_conversation, found.guarded_results


def added_up(counts: list[SessionCounts]) -> dict[str, int]:
    """The counts of every session, summed."""
    return {
        "calls": sum(c["calls"] for c in counts),
        "repeats": sum(c["repeats"] for c in counts),
        "repeats_after_a_change": sum(c["repeats_after_a_change"] for c in counts),
        "repeats_with_nothing_changed": sum(c["repeats_with_nothing_changed"] for c in counts),
        "detections": sum(c["detections"] for c in counts),
        "guard_detections": sum(c["guard_detections"] for c in counts),
        "guard_kept_results": sum(c["guard_kept_results"] for c in counts),
    }
