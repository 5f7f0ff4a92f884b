"""Claude Code with Opus 4.8 and the 5.x models sends its reminders as
``role: "system"`` messages inside ``messages``, and its moving breakpoint
can sit on the newest one. Such a message is a message like any other to
masking: counted as blocks in cache order, never moved or changed, and a
client breakpoint on the last one marks the end of the request."""

from __future__ import annotations

import json

from obsmask_core.conversation.billing.breakpoints import blocks_of, read_layout
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC

MARK = {"type": "ephemeral"}
POLICY = MaskPolicy(window_turns=1, price_model="auto", allowance_percent=2,
                    frontier_breakpoint=True)


def reminder(text: str) -> dict[str, object]:
    return {"role": "system",
            "content": [{"type": "text", "text": f"<system-reminder>{text}</system-reminder>"}]}


def session(turns: int, model: str = "claude-opus-4-8") -> dict[str, object]:
    """A Claude Code request: a reminder after every third tool turn and one
    at the end, which carries the moving breakpoint."""
    messages: list[dict[str, object]] = [
        {"role": "user", "content": [{"type": "text", "text": "Fix the failing test. " * 400}]}]
    for turn in range(turns):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": f"toolu_{turn}", "name": "Bash",
             "input": {"command": f"cat part{turn}.py"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{turn}",
             "content": f"line {turn}\n" * 3000}]})
        if turn % 3 == 2:
            messages.append(reminder(f"the todo list changed at turn {turn}"))
    messages.append(reminder("the user is waiting"))
    messages[-1]["content"][-1]["cache_control"] = dict(MARK)  # type: ignore[index]
    return {"model": model, "max_tokens": 1024,
            "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": MARK},
                       {"type": "text", "text": "Rules. " * 800, "cache_control": MARK}],
            "messages": messages}


def test_a_breakpoint_on_a_trailing_system_reminder_marks_the_end_of_the_request():
    body = session(6)
    layout = read_layout(body, body["messages"])  # type: ignore[arg-type]
    assert layout.marks_end and layout.breakpoints == 3 and layout.free_slot
    assert blocks_of(reminder("x")) == 1


def test_system_reminders_go_out_as_the_client_sent_them_in_their_places():
    body = session(10)
    outcome = mask_request_body(json.dumps(body).encode(), POLICY, ANTHROPIC)
    assert isinstance(outcome, Masked), outcome
    assert outcome.plan.decisions, "old results should be masked"
    forwarded = json.loads(outcome.body)["messages"]
    sent = body["messages"]
    assert len(forwarded) == len(sent)  # type: ignore[arg-type]
    for before, after in zip(sent, forwarded, strict=True):  # type: ignore[call-overload]
        if before["role"] == "system":
            assert after == before
    # The frontier breakpoint goes on an assistant message, never a reminder.
    added = outcome.plan.breakpoint
    assert added is not None and forwarded[added.item]["role"] == "assistant"
