"""Which old tool results to mask, and the spec's invariants (spec 001 §3, §5-§9)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from obsmask_core.error_heuristic import looks_like_error
from obsmask_core.policy import MaskPolicy, render_placeholder
from obsmask_core.tokens import message_strings
from obsmask_core.tool_turns import ChatMessage, Location, ToolResult, ToolTurnIndex
from obsmask_core.truncation import truncate_text
from obsmask_core.wire_formats import CHAT, WireFormat, set_at

MASKED = "masked"
CLIPPED = "clipped"
# Token estimates for the budget rules: about 4 characters a token, plus
# the framing of each item and of the reply (OpenAI's cookbook: 3 each).
CHARS_PER_TOKEN = 4
FRAMING_TOKENS = 3


@dataclass(frozen=True)
class MaskDecision:
    """One tool result to rewrite: where, what it was, and what it becomes
    (the placeholder when ``kind`` is "masked", a clipped text when "clipped")."""

    location: Location
    call_id: str
    tool_name: str | None
    original: str  # the text that goes
    original_value: object  # the value as found (a string or a list of blocks)
    new_text: str
    kind: str = MASKED


@dataclass
class MaskPlan:
    """The decisions for one request, and why the other results were kept."""

    decisions: list[MaskDecision] = field(default_factory=list)
    tool_turns: int = 0
    tool_results: int = 0
    # Tool turns before this one are past the masking frontier.
    frontier_turn: int = 0
    # "none", "masking", or "clipping" (seed 002's reduction stage).
    stage: str = "none"
    # reason -> count: in_window, pending (older than the window, not yet
    # past the frontier), error, per_tool, excluded, min_chars,
    # already_masked, short, not_text, orphan
    kept: Counter[str] = field(default_factory=Counter)

    @property
    def masked(self) -> int:
        return sum(1 for d in self.decisions if d.kind == MASKED)

    @property
    def clipped(self) -> int:
        return sum(1 for d in self.decisions if d.kind == CLIPPED)


def preserved_blocks(text: str, patterns: tuple[tuple[str, str], ...]) -> list[str]:
    """The blocks from a begin marker to its end marker (both included), in
    the order they appear; they survive masking (seed 002's dispatch results)."""
    found: list[tuple[int, str]] = []
    for begin, end in patterns:
        start = text.find(begin)
        while start >= 0:
            stop = text.find(end, start + len(begin))
            if stop < 0:
                break
            found.append((start, text[start : stop + len(end)]))
            start = text.find(begin, stop + len(end))
    return [block for _, block in sorted(found)]


def _masked_text(placeholder: str, blocks: list[str]) -> str:
    return placeholder + "".join("\n" + block for block in blocks)


def _is_masked(text: str, result: ToolResult, policy: MaskPolicy) -> bool:
    """Is ``text`` already what masking would make of this result?"""
    if policy.matcher.matches(text, result.call_id, result.tool_name):
        return True
    blocks = preserved_blocks(text, policy.preserve_patterns)
    suffix = _masked_text("", blocks)
    return bool(blocks) and text.endswith(suffix) and policy.matcher.matches(
        text[: len(text) - len(suffix)], result.call_id, result.tool_name
    )


def estimate_tokens(chars: int, items: int) -> int:
    """A cheap, deterministic estimate of a request's input tokens."""
    return chars // CHARS_PER_TOKEN + FRAMING_TOKENS * (items + 1)


def _item_chars(item: object) -> int:
    return sum(len(text) for text in message_strings(item))


class _Frontier:
    """Where the masking frontier stands for this request.

    The frontier is replayed over the conversation's own history, turn by
    turn, from the request alone: the request at an earlier turn is a prefix
    of this one, so every request of a conversation finds the same frontier
    for its past (retries, replays and several proxies agree), and it only
    ever moves forward. One pass over the turns: what a move would free is
    summed as the candidate target advances, not recounted for each target.
    """

    def __init__(
        self,
        index: ToolTurnIndex,
        items: Sequence[object],
        policy: MaskPolicy,
        maskable: dict[int, str],
    ) -> None:
        self.turn = 0
        self.request_end = 0  # items in the request at the last move
        measures = policy.trigger_tokens or policy.min_free_percent or policy.max_input_tokens
        # chars_before[i]: characters of the items before item i. Only the
        # rules that measure the request need it; the spec's window does not.
        self.chars_before = [0]
        if measures:
            for item in items:
                self.chars_before.append(self.chars_before[-1] + _item_chars(item))
        turns = index.turns
        # Per turn: characters its maskable results would free, and where the
        # first of them sits.
        freed_by_turn = [0] * len(turns)
        first_by_turn: list[int | None] = [None] * len(turns)
        for number, masked_text in maskable.items():
            result = index.results[number]
            freed_by_turn[result.turn] += len(result.text or "") - len(masked_text)
            position = result.location[0]
            first = first_by_turn[result.turn]
            first_by_turn[result.turn] = position if first is None else min(first, position)
        # Turns [self.turn, covered) are summed into freed / first.
        covered, freed, first_position = 0, 0, None
        for number in range(len(turns)):
            target = max(0, number + 1 - policy.window_turns)
            target -= target % policy.batch_turns
            if target <= self.turn:
                continue
            # Each turn is judged in the first request that holds it and its
            # results: a prefix of every later request, which all judge it alike.
            end = index.request_end_after(number, len(items))
            if (
                policy.trigger_tokens
                and estimate_tokens(self.chars_before[end], end) < policy.trigger_tokens
            ):
                continue
            for turn in range(covered, target):
                freed += freed_by_turn[turn]
                first = first_by_turn[turn]
                if first is not None and (first_position is None or first < first_position):
                    first_position = first
            covered = target
            if policy.min_free_percent and first_position is not None:
                # A move re-bills everything after the first newly masked result.
                rebilled = self.chars_before[end] - self.chars_before[first_position] - freed
                if freed * 100 < policy.min_free_percent * max(rebilled, 1):
                    continue
            self.turn, self.request_end = target, end
            freed, first_position = 0, None


def plan_masking(
    index: ToolTurnIndex, policy: MaskPolicy, items: Sequence[object] = ()
) -> MaskPlan:
    """Spec 001 §9 steps B to D, on the format-independent tool-turn model,
    with the cache-aware frontier and the clipping stage.

    ``items`` (the conversation list) is needed by the rules that measure
    the request: ``trigger_tokens``, ``min_free_percent``, ``max_input_tokens``.
    """
    plan = MaskPlan(tool_turns=len(index.turns), tool_results=len(index.results))
    plan.kept["orphan"] = len(index.orphans)
    if not policy.enabled or policy.window_turns <= 0:
        return plan

    # Only results older than the window can ever be masked; for them the
    # rules that depend on the result alone (the error heuristic reads the
    # whole text) are applied once: number -> reason kept, or masked text.
    first_in_window = max(0, len(index.turns) - policy.window_turns)
    reasons: dict[int, str] = {}
    maskable: dict[int, str] = {}
    for number, result in enumerate(index.results):
        if result.turn >= first_in_window:
            continue
        reason = _static_reason(result, policy)
        if reason is not None:
            reasons[number] = reason
            continue
        assert result.text is not None
        placeholder = render_placeholder(
            policy.placeholder_template, result.call_id, result.tool_name, len(result.text)
        )
        blocks = preserved_blocks(result.text, policy.preserve_patterns)
        new_text = _masked_text(placeholder, blocks)
        if len(new_text) < len(result.text):
            maskable[number] = new_text
        else:
            reasons[number] = "short"  # a placeholder must save something

    frontier = _Frontier(index, items, policy, maskable)
    plan.frontier_turn = frontier.turn

    # Spec 001 §7: the K most recent results of each tool stay. Counted in the
    # request as it was when the frontier last moved, so the masked prefix
    # does not change between moves.
    kept_by_tool: set[int] = set()
    if policy.per_tool_keep > 0:
        seen: Counter[str | None] = Counter()
        for number in range(len(index.results) - 1, -1, -1):
            result = index.results[number]
            if frontier.request_end and result.location[0] >= frontier.request_end:
                continue
            if seen[result.tool_name] < policy.per_tool_keep:
                seen[result.tool_name] += 1
                kept_by_tool.add(number)

    for number, result in enumerate(index.results):
        if result.turn >= first_in_window:
            plan.kept["in_window"] += 1
        elif result.turn >= frontier.turn:
            plan.kept["pending"] += 1
        elif number in kept_by_tool:
            plan.kept["per_tool"] += 1
        elif number in reasons:
            plan.kept[reasons[number]] += 1
        else:
            assert result.text is not None
            plan.decisions.append(
                MaskDecision(
                    location=result.location,
                    call_id=result.call_id,
                    tool_name=result.tool_name,
                    original=result.text,
                    original_value=result.content,
                    new_text=maskable[number],
                )
            )
    if plan.decisions:
        plan.stage = "masking"
    if policy.max_input_tokens and items:
        _clip(plan, index, items, policy, frontier)
    return plan


def _static_reason(result: ToolResult, policy: MaskPolicy) -> str | None:
    """Why a result is never masked, whatever its age (None: it may be)."""
    text = result.text
    if text is None:
        return "not_text"  # spec 001 §5.2.2: nothing it knows how to replace
    if _is_masked(text, result, policy):
        return "already_masked"
    if result.tool_name is not None and result.tool_name in policy.exclude_tools:
        return "excluded"
    if len(text) < policy.min_chars:
        return "min_chars"
    if policy.keep_errors and (result.is_error or looks_like_error(text)):
        return "error"
    return None


def _clip(
    plan: MaskPlan,
    index: ToolTurnIndex,
    items: Sequence[object],
    policy: MaskPolicy,
    frontier: _Frontier,
) -> None:
    """Seed 002's second stage: while the request is still estimated over
    ``max_input_tokens``, clip results inside the window to head + marker +
    tail, oldest first. No message is ever removed."""
    chars = frontier.chars_before[-1] - sum(
        len(d.original) - len(d.new_text) for d in plan.decisions
    )
    if estimate_tokens(chars, len(items)) <= policy.max_input_tokens:
        return
    masked = {d.location for d in plan.decisions}
    for result in index.results:
        if estimate_tokens(chars, len(items)) <= policy.max_input_tokens:
            break
        text = result.text
        if (
            text is None
            or result.location in masked
            or result.turn < frontier.turn
            or (result.tool_name is not None and result.tool_name in policy.exclude_tools)
        ):
            continue
        clipped = truncate_text(text, policy.clip_head_chars, policy.clip_tail_chars)
        if clipped == text:
            continue
        plan.decisions.append(
            MaskDecision(
                location=result.location,
                call_id=result.call_id,
                tool_name=result.tool_name,
                original=text,
                original_value=result.content,
                new_text=clipped,
                kind=CLIPPED,
            )
        )
        chars -= len(text) - len(clipped)
        plan.stage = "clipping"


def apply_plan(items: list[object], plan: MaskPlan, fmt: WireFormat) -> list[object]:
    """A new list with the planned results replaced; the input is not modified
    (containers on the way to a replaced value are copied)."""
    out = list(items)
    for decision in plan.decisions:
        set_at(
            out,
            decision.location[0],
            fmt.value_path(decision.location),
            fmt.replacement(decision.original_value, decision.new_text),
        )
    return out


def mask_items(items: list[object], policy: MaskPolicy, fmt: WireFormat) -> list[object]:
    """The conversation list of any format (``messages``, ``input``) with its
    old tool results masked; the input is not modified."""
    return apply_plan(items, plan_masking(fmt.index(items), policy, items), fmt)


def plan_chat_masking(messages: list[object], policy: MaskPolicy) -> MaskPlan:
    return plan_masking(CHAT.index(messages), policy, messages)


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
