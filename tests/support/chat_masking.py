"""Chat Completions masking in the shapes the tests use: the messages list in,
the masked list out, and the chat-only invariant check written from the
rules themselves (independent of the code under test)."""

from __future__ import annotations

from obsmask_core.conversation.body.request_body import ExactBody
from obsmask_core.conversation.body.request_text import UnsupportedBody
from obsmask_core.conversation.masking.apply import apply_plan
from obsmask_core.conversation.masking.outcomes import RewriteOutcome
from obsmask_core.conversation.masking.rewrite import mask_read_body
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.turn_model import ChatMessage
from obsmask_core.conversation.turns.wire_formats import CHAT
from support.chat import user

# Masks every result outside the last turn, and only moves when a tool turn
# is added: a request that adds an answer and a reply (ANSWER_AND_REPLY)
# plans what the one before planned.
LAST_TURN_POLICY = MaskPolicy(window_turns=1, price_model="none", min_free_percent=0)
ANSWER_AND_REPLY = [{"role": "assistant", "content": "It is fixed."},
                    user("Thanks. Now the docs.")]


def plan_chat_masking(messages: list[object], policy: MaskPolicy) -> MaskPlan:
    return plan_masking(CHAT.index(messages), policy, messages)


def assert_goes_out_as_read_exactly(request: bytes, outcome: RewriteOutcome,
                                    policy: MaskPolicy) -> None:
    """``outcome`` (of masking the Chat body ``request``) is what the exact
    reader makes of it alone: the same kind and bytes, or Unreadable for a
    body that is not a request."""
    try:
        expected = mask_read_body(ExactBody.read(request, "messages"), policy, CHAT)
    except UnsupportedBody:
        assert type(outcome).__name__ == "Unreadable"
        return
    assert type(outcome) is type(expected)
    assert (outcome.body or request) == (expected.body or request)


def mask_old_tool_results(
    messages: list[ChatMessage], policy: MaskPolicy
) -> list[ChatMessage]:
    """The messages with old tool results replaced by placeholders.

    The input is not modified; the result is a new list."""
    as_objects: list[object] = list(messages)
    masked = apply_plan(as_objects, plan_chat_masking(as_objects, policy), CHAT)
    # Every element is still a dict (masked ones are dict copies); the filter
    # only tells the type checker so.
    return [message for message in masked if isinstance(message, dict)]


def check_chat_invariants(before: list[object], after: list[object]) -> list[str]:
    """What masking changed that it must never change.

    Returns one line per violation (empty when all hold): no message added or
    removed, none reordered, no ``tool_call_id`` changed, no ``tool_calls``
    changed, and nothing changed but the ``content`` of ``role: "tool"``
    messages."""
    problems: list[str] = []
    if len(before) != len(after):
        return [f"message count changed from {len(before)} to {len(after)}"]
    for position, (old, new) in enumerate(zip(before, after, strict=True)):
        if old is new or old == new:
            continue
        if not isinstance(old, dict) or not isinstance(new, dict):
            problems.append(f"message {position} changed and is not an object")
            continue
        if old.get("role") != new.get("role"):
            problems.append(f"message {position} changed role: reordered or replaced")
            continue
        if old.get("tool_call_id") != new.get("tool_call_id"):
            problems.append(f"message {position}: tool_call_id changed")
        if old.get("tool_calls") != new.get("tool_calls"):
            problems.append(f"message {position}: tool_calls changed")
        if old.keys() != new.keys() or any(
            old[key] != new[key] for key in old if key != "content"
        ):
            problems.append(f"message {position}: a field other than content changed")
        if old.get("role") != "tool":
            problems.append(f"message {position}: content of a non-tool message changed")
    return problems
