"""Mask a whole request body: bytes in, bytes (or nothing) out."""

from __future__ import annotations

import json
from dataclasses import dataclass

from obsmask_core.json_spans import Span, UnsupportedBody, loads, parse_request, splice
from obsmask_core.masking import MaskPlan, apply_plan, check_only_planned_changes, plan_masking
from obsmask_core.policy import MaskPolicy
from obsmask_core.wire_formats import CHAT, WireFormat


@dataclass(frozen=True)
class BodyOutcome:
    """What happened to one body.

    ``body`` is the new body, or None when the original must go out as it
    came (then ``reason`` says why, for the log). ``violation`` is set when the
    masked body failed the after-the-fact invariant check. ``tool_chars_*``
    count the characters of the tool results' text.
    """

    body: bytes | None
    reason: str
    plan: MaskPlan | None = None
    tool_chars_before: int = 0
    tool_chars_after: int = 0
    violation: str | None = None


def mask_request_body(body: bytes, policy: MaskPolicy, fmt: WireFormat = CHAT) -> BodyOutcome:
    """Mask old tool results in a request body of format ``fmt``.

    Only the values chosen by the policy are replaced in the original text;
    every other byte stays. The result is parsed again and checked against
    the spec's invariants (the safety net of seed 002): if it fails, the
    outcome carries no body and names the violation.
    """
    if not policy.enabled:
        return BodyOutcome(None, "masking is disabled")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        return BodyOutcome(None, f"body is not valid UTF-8 (byte {e.start})")
    try:
        request = parse_request(text, fmt.list_member)
    except UnsupportedBody as e:
        return BodyOutcome(None, str(e))

    index = fmt.index(request.items)
    plan = plan_masking(index, policy, request.items)
    chars = sum(len(result.text) for result in index.results if result.text is not None)
    if not plan.decisions:
        return BodyOutcome(None, "nothing to mask", plan, chars, chars)
    chars_after = chars - sum(
        len(d.original) - len(d.new_text) for d in plan.decisions
    )

    replacements: list[tuple[Span, str]] = []
    for decision in plan.decisions:
        span = request.span_at(decision.location[0], fmt.value_path(decision.location))
        if span is None:
            return BodyOutcome(None, "masked body failed its check", plan, chars, chars,
                               violation="a planned value could not be located")
        new_value = fmt.replacement(decision.original_value, decision.new_text)
        replacements.append((span, json.dumps(new_value, ensure_ascii=False)))
    new_text = splice(text, replacements)

    expected = apply_plan(request.items, plan, fmt)
    violation = _verify(new_text, request.members, request.items, expected, plan, fmt)
    if violation is not None:
        return BodyOutcome(
            None, "masked body failed its check", plan, chars, chars, violation=violation
        )
    return BodyOutcome(new_text.encode("utf-8"), "masked", plan, chars, chars_after)


def _verify(
    new_text: str,
    members: dict[str, object],
    before: list[object],
    expected: list[object],
    plan: MaskPlan,
    fmt: WireFormat,
) -> str | None:
    """Parse the masked text again: the invariants must hold, and the result
    must be exactly the original with the planned values replaced."""
    try:
        after = loads(new_text)
    except (ValueError, RecursionError) as e:
        return f"masked body is not valid JSON ({e})"
    if not isinstance(after, dict) or after.keys() != members.keys():
        return "masked body has different top-level members"
    for key, value in members.items():
        if key != fmt.list_member and after[key] != value:
            return f"top-level member {key!r} changed"
    items = after[fmt.list_member]
    if not isinstance(items, list):
        return f"masked body has no {fmt.list_member} list"
    problems = check_only_planned_changes(before, items, plan, fmt)
    if problems:
        return "; ".join(problems[:3])
    if items != expected:
        return "masked values differ from the plan"
    return None
