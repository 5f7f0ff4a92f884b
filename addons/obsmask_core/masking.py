"""Which old tool results to mask, and the spec's invariants (spec 001 §3, §5-§9)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from obsmask_core.error_heuristic import looks_like_error
from obsmask_core.policy import MaskPolicy, render_placeholder
from obsmask_core.tool_turns import ChatMessage, ToolTurnIndex, index_chat_tool_turns


@dataclass(frozen=True)
class MaskDecision:
    """One tool result to replace: where, and by what."""

    location: tuple[int, ...]
    call_id: str
    tool_name: str | None
    original: str
    placeholder: str


@dataclass
class MaskPlan:
    """The decisions for one request, and why the other results were kept."""

    decisions: list[MaskDecision] = field(default_factory=list)
    tool_turns: int = 0
    tool_results: int = 0
    # reason -> count: in_window, error, per_tool, already_masked, short,
    # not_string, orphan
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
        content = result.content
        if result.turn >= first_kept_turn:
            plan.kept["in_window"] += 1
        elif number in kept_by_tool:
            plan.kept["per_tool"] += 1
        elif not isinstance(content, str):
            plan.kept["not_string"] += 1  # spec 001 §5.2.2: multimodal lists etc.
        elif policy.matcher.matches(content, result.call_id, result.tool_name):
            plan.kept["already_masked"] += 1
        elif policy.keep_errors and looks_like_error(content):
            plan.kept["error"] += 1
        else:
            placeholder = render_placeholder(
                policy.placeholder_template, result.call_id, result.tool_name, len(content)
            )
            if len(placeholder) >= len(content):
                plan.kept["short"] += 1  # a placeholder must save something
                continue
            plan.decisions.append(
                MaskDecision(
                    location=result.location,
                    call_id=result.call_id,
                    tool_name=result.tool_name,
                    original=content,
                    placeholder=placeholder,
                )
            )
    return plan


def plan_chat_masking(messages: list[object], policy: MaskPolicy) -> MaskPlan:
    return plan_masking(index_chat_tool_turns(messages), policy)


def apply_chat_plan(messages: list[object], plan: MaskPlan) -> list[object]:
    """A new list: masked messages are copies, the others the same objects."""
    out = list(messages)
    for decision in plan.decisions:
        (position,) = decision.location
        original = out[position]
        assert isinstance(original, dict)
        masked = dict(original)
        masked["content"] = decision.placeholder
        out[position] = masked
    return out


def mask_old_tool_results(
    messages: list[ChatMessage], policy: MaskPolicy
) -> list[ChatMessage]:
    """Spec 001 §8: the messages with old tool results replaced by placeholders.

    The input is not modified; the result is a new list.
    """
    as_objects: list[object] = list(messages)
    masked = apply_chat_plan(as_objects, plan_chat_masking(as_objects, policy))
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
    for position, (old, new) in enumerate(zip(before, after, strict=False)):
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
