"""Mask a whole Chat Completions request body: bytes in, bytes (or nothing) out."""

from __future__ import annotations

import json
from dataclasses import dataclass

from obsmask_core.json_spans import (
    UnsupportedBody,
    loads,
    parse_chat_request,
    splice,
)
from obsmask_core.masking import (
    MaskPlan,
    apply_chat_plan,
    check_chat_invariants,
    plan_chat_masking,
)
from obsmask_core.policy import MaskPolicy


@dataclass(frozen=True)
class ChatBodyOutcome:
    """What happened to one body.

    ``body`` is the new body, or None when the original must go out as it
    came (then ``reason`` says why, for the log). ``violation`` is set when the
    masked body failed the after-the-fact invariant check.
    """

    body: bytes | None
    reason: str
    plan: MaskPlan | None = None
    tool_chars_before: int = 0
    tool_chars_after: int = 0
    violation: str | None = None


def _tool_chars(messages: list[object]) -> int:
    return sum(
        len(m["content"])
        for m in messages
        if isinstance(m, dict) and m.get("role") == "tool" and isinstance(m.get("content"), str)
    )


def mask_chat_body(body: bytes, policy: MaskPolicy) -> ChatBodyOutcome:
    """Mask old tool results in a Chat Completions request body.

    Only the ``content`` strings chosen by the policy are replaced in the
    original text; every other byte stays. The result is parsed again and
    checked against the spec's invariants (the safety net of seed 002): if it
    fails, the outcome carries no body and names the violation.
    """
    if not policy.enabled:
        return ChatBodyOutcome(None, "masking is disabled")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        return ChatBodyOutcome(None, f"body is not valid UTF-8 (byte {e.start})")
    try:
        request = parse_chat_request(text)
    except UnsupportedBody as e:
        return ChatBodyOutcome(None, str(e))

    plan = plan_chat_masking(request.messages, policy)
    chars = _tool_chars(request.messages)
    if not plan.decisions:
        return ChatBodyOutcome(
            None, "nothing to mask", plan, tool_chars_before=chars, tool_chars_after=chars
        )

    replacements = []
    for decision in plan.decisions:
        (position,) = decision.location
        span = request.content_span(position)
        assert span is not None  # a decision is only made for a string content
        replacements.append((span, json.dumps(decision.placeholder, ensure_ascii=False)))
    new_text = splice(text, replacements)

    expected = apply_chat_plan(request.messages, plan)
    violation = _verify(new_text, request.members, request.messages, expected)
    if violation is not None:
        return ChatBodyOutcome(
            None, "masked body failed its check", plan, chars, chars, violation=violation
        )
    return ChatBodyOutcome(
        new_text.encode("utf-8"),
        "masked",
        plan,
        tool_chars_before=chars,
        tool_chars_after=_tool_chars(expected),
    )


def _verify(
    new_text: str,
    members: dict[str, object],
    before: list[object],
    expected: list[object],
) -> str | None:
    """Parse the masked text again: the invariants must hold, and the result
    must be exactly the original with the planned contents replaced."""
    try:
        after = loads(new_text)
    except (ValueError, RecursionError) as e:
        return f"masked body is not valid JSON ({e})"
    if not isinstance(after, dict) or after.keys() != members.keys():
        return "masked body has different top-level members"
    for key, value in members.items():
        if key != "messages" and after[key] != value:
            return f"top-level member {key!r} changed"
    messages = after["messages"]
    if not isinstance(messages, list):
        return "masked body has no messages list"
    problems = check_chat_invariants(before, messages)
    if problems:
        return "; ".join(problems[:3])
    if messages != expected:
        return "masked messages differ from the plan"
    return None


