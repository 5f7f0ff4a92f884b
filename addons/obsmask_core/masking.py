"""Which old tool results to mask, and the spec's invariants (spec 001 §3, §5-§9)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from obsmask_core.error_heuristic import looks_like_error
from obsmask_core.policy import MaskPolicy, render_placeholder
from obsmask_core.tool_turns import ChatMessage, Location, ToolTurnIndex
from obsmask_core.wire_formats import CHAT, WireFormat, set_at


@dataclass(frozen=True)
class MaskDecision:
    """One tool result to replace: where, what it was, and its placeholder."""

    location: Location
    call_id: str
    tool_name: str | None
    original: str  # the text that goes
    original_value: object  # the value as found (a string or a list of blocks)
    placeholder: str


@dataclass
class MaskPlan:
    """The decisions for one request, and why the other results were kept."""

    decisions: list[MaskDecision] = field(default_factory=list)
    tool_turns: int = 0
    tool_results: int = 0
    # reason -> count: in_window, error, per_tool, already_masked, short,
    # not_text, orphan
    kept: Counter[str] = field(default_factory=Counter)

    @property
    def masked(self) -> int:
        return len(self.decisions)


def plan_masking(index: ToolTurnIndex, policy: MaskPolicy) -> MaskPlan:
    """Spec 001 §9 steps B to D, on the format-independent tool-turn model."""
    plan = MaskPlan(tool_turns=len(index.turns), tool_results=len(index.results))
    plan.kept["orphan"] = len(index.orphans)
    if not policy.enabled or policy.window_turns <= 0:
        return plan

    first_kept_turn = max(0, len(index.turns) - policy.window_turns)
    # Spec 001 §7: the K most recent results of each tool stay, window or not.
    kept_by_tool: set[int] = set()
    if policy.per_tool_keep > 0:
        seen: Counter[str | None] = Counter()
        for number in range(len(index.results) - 1, -1, -1):
            name = index.results[number].tool_name
            if seen[name] < policy.per_tool_keep:
                seen[name] += 1
                kept_by_tool.add(number)

    for number, result in enumerate(index.results):
        text = result.text
        if result.turn >= first_kept_turn:
            plan.kept["in_window"] += 1
        elif number in kept_by_tool:
            plan.kept["per_tool"] += 1
        elif text is None:
            plan.kept["not_text"] += 1  # spec 001 §5.2.2: nothing it knows how to replace
        elif policy.matcher.matches(text, result.call_id, result.tool_name):
            plan.kept["already_masked"] += 1
        elif policy.keep_errors and (result.is_error or looks_like_error(text)):
            plan.kept["error"] += 1
        else:
            placeholder = render_placeholder(
                policy.placeholder_template, result.call_id, result.tool_name, len(text)
            )
            if len(placeholder) >= len(text):
                plan.kept["short"] += 1  # a placeholder must save something
                continue
            plan.decisions.append(
                MaskDecision(
                    location=result.location,
                    call_id=result.call_id,
                    tool_name=result.tool_name,
                    original=text,
                    original_value=result.content,
                    placeholder=placeholder,
                )
            )
    return plan


def apply_plan(items: list[object], plan: MaskPlan, fmt: WireFormat) -> list[object]:
    """A new list with the planned results replaced; the input is not modified
    (containers on the way to a replaced value are copied)."""
    out = list(items)
    for decision in plan.decisions:
        set_at(
            out,
            decision.location[0],
            fmt.value_path(decision.location),
            fmt.replacement(decision.original_value, decision.placeholder),
        )
    return out


def mask_items(items: list[object], policy: MaskPolicy, fmt: WireFormat) -> list[object]:
    """The conversation list of any format (``messages``, ``input``) with its
    old tool results masked; the input is not modified."""
    return apply_plan(items, plan_masking(fmt.index(items), policy), fmt)


def plan_chat_masking(messages: list[object], policy: MaskPolicy) -> MaskPlan:
    return plan_masking(CHAT.index(messages), policy)


def mask_old_tool_results(
    messages: list[ChatMessage], policy: MaskPolicy
) -> list[ChatMessage]:
    """Spec 001 §8: the messages with old tool results replaced by placeholders.

    The input is not modified; the result is a new list.
    """
    as_objects: list[object] = list(messages)
    masked = apply_plan(as_objects, plan_chat_masking(as_objects, policy), CHAT)
    # Every element is still a dict (masked ones are dict copies); the filter
    # only tells the type checker so.
    return [message for message in masked if isinstance(message, dict)]


def check_chat_invariants(before: list[object], after: list[object]) -> list[str]:
    """Spec 001 §3: what masking changed that it must never change.

    Returns one line per violation (empty when all hold): no message added or
    removed (§3.1.1), none reordered (§3.1.2), no ``tool_call_id`` changed
    (§3.1.3), no ``tool_calls`` changed (§3.1.4), and nothing changed but the
    ``content`` of ``role: "tool"`` messages (§3.2).
    """
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


def check_only_planned_changes(
    before: list[object], after: list[object], plan: MaskPlan, fmt: WireFormat
) -> list[str]:
    """The invariants of spec 001 §3 for any format: the same number of items
    in the same order, and nothing changed but the planned results' values
    (so no id, call, block or other field). One line per violation."""
    if len(before) != len(after):
        return [f"item count changed from {len(before)} to {len(after)}"]
    planned: dict[int, list[Location]] = {}
    for decision in plan.decisions:
        planned.setdefault(decision.location[0], []).append(decision.location)
    problems = []
    for position, (old, new) in enumerate(zip(before, after, strict=True)):
        if position not in planned:
            if old != new:
                problems.append(f"item {position} changed but was not planned to")
            continue
        # Blank the planned values on both sides: what remains must be equal.
        old_rest, new_rest = [old], [new]
        try:
            for location in planned[position]:
                set_at(old_rest, 0, fmt.value_path(location), None)
                set_at(new_rest, 0, fmt.value_path(location), None)
        except (TypeError, KeyError, IndexError):
            problems.append(f"item {position} changed shape")
            continue
        if old_rest != new_rest:
            problems.append(f"item {position}: something besides the masked result changed")
    return problems
