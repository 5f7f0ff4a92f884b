"""Which old tool results to mask or clip in one request, and why the others stay.

The plan works on the format-independent tool-turn model: results of tool
turns older than the window and past the frontier are masked, unless a rule
keeps them (an error, the last K of a tool, an excluded tool, too short...);
then, if the request is still over its budget, results inside the window are
clipped to head + marker + tail. No item is ever added, removed or moved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, NamedTuple
from weakref import WeakKeyDictionary

from obsmask_core.conversation.billing.breakpoint_billing import BreakpointBilling
from obsmask_core.conversation.billing.breakpoints import (
    AddedBreakpoint,
    CacheLayout,
    closing_block,
    marked,
    next_control,
)
from obsmask_core.conversation.billing.ledger import BillSoFar, prefix_tokens
from obsmask_core.conversation.planning.checkpoints import Checkpoints, items_json
from obsmask_core.conversation.planning.error_heuristic import looks_like_error
from obsmask_core.conversation.planning.frontier import Frontier, estimate_tokens
from obsmask_core.conversation.planning.holdout import ConversationName, conversation_name
from obsmask_core.conversation.planning.judgements import Judgement, KeptReason
from obsmask_core.conversation.planning.refetch import refetch_facts
from obsmask_core.conversation.reuse.previous_requests import forget_previous_requests
from obsmask_core.conversation.settings.policy import MaskPolicy, render_placeholder
from obsmask_core.conversation.turns.turn_model import Location, ToolResult, ToolTurnIndex
from obsmask_core.shared.refetch_facts import RefetchFacts
from obsmask_core.shared.truncation import truncate_text

DecisionKind = Literal["masked", "clipped", "recalled"]
MASKED: DecisionKind = "masked"
CLIPPED: DecisionKind = "clipped"
# A recall stub replaced by the text it asks for (``recall``).
RECALLED: DecisionKind = "recalled"
# The reduction stage a request reached: nothing, masking old results, or
# clipping recent ones as well.
Stage = Literal["none", "masking", "clipping"]



class MaskDecision(NamedTuple):
    """One tool result to rewrite: where, what it was, and what it becomes
    (the placeholder when ``kind`` is "masked", a clipped text when
    "clipped", the recalled text when "recalled"). A named tuple, like the
    turn model's values: one is made per masked result of every request."""

    location: Location
    call_id: str
    tool_name: str | None
    original: str  # the text that goes
    original_value: object  # the value as found (a string or a list of blocks)
    new_text: str
    kind: DecisionKind = MASKED


@dataclass
class MaskPlan:
    """The decisions for one request, and why the other results were kept."""

    decisions: list[MaskDecision] = field(default_factory=list)
    tool_turns: int = 0
    tool_results: int = 0
    # Tool turns before this one are past the masking frontier.
    frontier_turn: int = 0
    stage: Stage = "none"
    kept: Counter[KeptReason] = field(default_factory=Counter)
    # Why each kept result was kept, by its location (orphans included):
    # ``kept`` counts these. A result kept by the first stage and then
    # clipped by the second is in both (its decision says "clipped").
    kept_at: dict[Location, KeptReason] = field(default_factory=dict)
    # The bill so far (None when the price model has no cache, or nothing
    # was planned); True when the conversation is in the holdout group.
    bill: BillSoFar | None = None
    held_out: bool = False
    # The conversation's name (holdout.conversation_id): totals group by it.
    # ``name`` holds it with its holdout bucket.
    conversation: str | None = None
    name: ConversationName | None = field(default=None, repr=False, compare=False)
    # orjson's writing of the items without the closing bracket, as the
    # frontier's checkpoint keeps it (None when none was kept): the next
    # request that grew from this one writes its own from it.
    items_written: bytes | None = field(default=None, repr=False, compare=False)
    # Each result's judgement, by number (None: inside the window, not
    # judged): the next request of the conversation starts from these.
    judgements: list[Judgement | None] = field(default_factory=list, repr=False,
                                               compare=False)
    # The frontier breakpoint the request goes out with (Anthropic), if any.
    breakpoint: AddedBreakpoint | None = None
    # Calls the model made again once masking took their result (``refetch``).
    refetches: RefetchFacts = field(default_factory=RefetchFacts)

    @property
    def masked(self) -> int:
        return sum(1 for d in self.decisions if d.kind == MASKED)

    @property
    def clipped(self) -> int:
        return sum(1 for d in self.decisions if d.kind == CLIPPED)

    @property
    def recalled(self) -> int:
        return sum(1 for d in self.decisions if d.kind == RECALLED)


def preserved_blocks(text: str, patterns: tuple[tuple[str, str], ...]) -> list[str]:
    """The blocks from a begin marker to its end marker (both included), in
    the order they appear; they survive masking (structured results, such as
    a sub-agent's dispatch report, that the model must keep)."""
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


def plan_masking(
    index: ToolTurnIndex, policy: MaskPolicy, items: Sequence[object] = (),
    *, recall: bool = False, recalled: frozenset[Location] = frozenset(),
    written_open: bytes | None = None, name: ConversationName | None = None,
    judged_before: Sequence[Judgement | None] = (),
    layout: CacheLayout | None = None,
    cold_ends: frozenset[int] = frozenset(),
) -> MaskPlan:
    """The plan for one request: which old results are masked (older than the
    window and past the frontier, and no rule keeps them), then which recent
    ones are clipped if the request is still over its budget.

    ``items`` (the conversation list) is needed by the rules that measure
    the request: ``trigger_tokens``, ``min_free_percent``, ``max_input_tokens``.
    With ``recall``, placeholders and clip markers say how to get the text
    back (unless the call's id names several results of the request: a
    recall could not tell which); the ``recalled`` results are never
    clipped (the model asked for them whole). ``written_open`` is orjson's
    writing of ``items`` without the closing bracket, when the caller has it
    (``checkpoints.items_json``), and ``name`` the conversation's name and
    bucket (``holdout.conversation_name``), when it knows them. ``judged_before``
    are the judgements of the first results (``MaskPlan.judgements`` of the
    conversation's previous request under the same policy, whose results
    these are, with no recall to change what an id names). ``layout`` is an
    Anthropic request's cache breakpoints (``breakpoints.read_layout``):
    the ledger then bills under Anthropic's cache, and the plan may add the
    frontier breakpoint (``MaskPlan.breakpoint``); without one, OpenAI's.
    ``cold_ends`` are the request ends (numbers of items) at which the
    conversation came back after the cache's lifetime (``last_seen``): the
    ledger bills those requests as read from no cache.
    """
    if name is None:
        name = conversation_name(items)
    plan = MaskPlan(tool_turns=len(index.turns), tool_results=len(index.results),
                    conversation=name.id if name is not None else None, name=name)
    plan.kept["orphan"] = len(index.orphans)
    plan.kept_at.update((location, "orphan") for location in index.orphans)
    if not policy.enabled or policy.window_turns <= 0:
        return plan
    if name is not None and name.held_out(policy.holdout_percent):
        # Never masked, but billed like the others, so the two groups' bills
        # can be compared (with nothing maskable both bills are the same).
        plan.held_out = True
        plan.bill = Frontier(index, items, policy, {}, layout=layout,
                             cold_ends=cold_ends).bill()
        return plan

    # Only results older than the window can ever be masked; for them the
    # rules that depend on the result alone (the error heuristic reads the
    # whole text) are applied once: number -> reason kept, or masked text.
    recallable = _recallable(index) if recall else frozenset()
    first_in_window = max(0, len(index.turns) - policy.window_turns)
    reasons: dict[int, KeptReason] = {}
    maskable: dict[int, str] = {}
    try:
        judged = _judgements.setdefault(policy, {})
    except TypeError:  # a policy built with lists, not tuples: judged afresh
        judged = {}
    if len(judged) >= _JUDGEMENTS_KEPT:
        judged.clear()
    known = len(judged_before)
    judgements: list[Judgement | None] = [None] * len(index.results)
    plan.judgements = judgements
    for number, result in enumerate(index.results):
        if result.turn >= first_in_window:
            continue
        judgement = judged_before[number] if number < known else None
        if judgement is None:
            recallable_id = result.call_id in recallable
            key = (result.call_id, result.tool_name, result.is_error, recallable_id,
                   None if result.text is None else (hash(result.text), len(result.text)))
            judgement = judged.get(key)
            if judgement is None:
                judgement = judged[key] = _judge(result, policy, recallable_id)
        judgements[number] = judgement
        if judgement[0] is not None:
            reasons[number] = judgement[0]
        else:
            maskable[number] = judgement[1]

    frontier = _frontier(index, items, policy, maskable, plan.conversation, written_open,
                         layout, cold_ends)
    plan.frontier_turn = frontier.turn
    plan.items_written = frontier.items_written
    plan.bill = frontier.bill()
    # The results of calls the model fetched again stay (``refetch_guard``).
    guarded = frontier.guarded_results()
    for number in guarded:
        if number in maskable and number not in reasons:
            reasons[number] = "refetched"

    # The K most recent results of each tool stay. Counted in the
    # request as it was when the frontier last moved, so the masked prefix
    # does not change between moves. A result placed after that request
    # (one of an old turn, sent after a later answer) is more recent than
    # all of those counted: it stays too, until the next move counts it.
    kept_by_tool: set[int] = set()
    if (keep := policy.per_tool_keep) > 0:
        seen: dict[str | None, int] = {}
        request_end, results = frontier.request_end, index.results
        for number in range(len(results) - 1, -1, -1):
            result = results[number]
            if request_end and result.location[0] >= request_end:
                kept_by_tool.add(number)
                continue
            if (count := seen.get(result.tool_name, 0)) < keep:
                seen[result.tool_name] = count + 1
                kept_by_tool.add(number)

    # Every result of every request passes here: the loop reads locals
    # (frontier.masks without a call, the counts summed apart).
    frontier_turn, masked_turns = frontier.turn, frontier.masked_turns()
    kept_at, decide = plan.kept_at, plan.decisions.append
    counts: dict[KeptReason, int] = {}
    for number, result in enumerate(index.results):
        turn = result.turn
        kept: KeptReason | None = None
        if turn >= first_in_window:
            kept = "in_window"
        elif turn >= frontier_turn:
            kept = "pending"
        elif not masked_turns[turn]:
            kept = "cache"
        elif number in kept_by_tool:
            kept = "per_tool"
        else:
            kept = reasons.get(number)
        if kept is not None:
            counts[kept] = counts.get(kept, 0) + 1
            kept_at[result.location] = kept
        else:
            assert result.text is not None
            decide(MaskDecision(result.location, result.call_id, result.tool_name,
                                result.text, result.content, maskable[number]))
    plan.kept.update(counts)
    plan.refetches = refetch_facts(frontier.watch.refetches, index,
                                   counts.get("refetched", 0))
    if plan.decisions:
        plan.stage = "masking"
    if policy.max_input_tokens and items:
        _clip(plan, index, items, policy, frontier, recallable, recalled)
    if plan.masked:
        plan.breakpoint = _added_breakpoint(frontier, items, layout, plan)
    if plan.bill is not None:
        plan.bill = _with_prediction(plan.bill, frontier, plan)
    return plan


def _with_prediction(bill: BillSoFar, frontier: Frontier, plan: MaskPlan) -> BillSoFar:
    """The bill with what the provider should report for this request,
    counted on the request as it goes out: the ledger's entries are the
    boundaries of this request (nothing before them changed since they
    were written), and the tokens up to each are its characters, the
    planned texts in place, by the same estimate (under Anthropic's cache;
    under another, the ledger's own estimate stays)."""
    points = frontier.prediction_points()
    billing = frontier.ledger.billing if frontier.ledger is not None else None
    if points is None or not isinstance(billing, BreakpointBilling):
        return bill
    chars = frontier.chars_before
    changes = sorted((d.location[0], len(d.new_text) - len(d.original)) for d in plan.decisions)

    def tokens(boundary: int | None) -> int:
        if boundary is None:
            return 0
        changed = sum(change for item, change in changes if item < boundary)
        return billing.preamble_tokens + prefix_tokens(chars[boundary] + changed, boundary)

    # An entry exists only where its prefix reached the minimum when it was
    # written: its prefix then is this request's, so the count is exact here.
    minimum, preamble = billing.minimum, billing.preamble_tokens
    floor = preamble if billing.system_entry else 0
    read_at, written_to = points
    read = tokens(read_at)
    if read_at is not None and read < minimum:
        read = floor
    written = tokens(written_to)
    if written < minimum:
        written = read
    return replace(bill, predicted_read=read, predicted_written=max(0, written - read),
                   predicted_input=tokens(len(chars) - 1))


# An agent sends the same old results again every turn: they are judged once
# per policy (equal policies share), by call id, tool, error flag, whether a
# recall can name them, and the text's hash and length (not the text itself).
# Two texts that share all of these are about 1 in 2**64. The masked text
# kept holds the result's preserved blocks, so an entry can weigh a few KB:
# 20,000 of them per policy, then the cache starts again.
_judgements: WeakKeyDictionary[MaskPolicy, dict[Hashable, Judgement]] = WeakKeyDictionary()
_JUDGEMENTS_KEPT = 20_000


# The frontier's checkpoints, per policy like the judgements.
_checkpoints: WeakKeyDictionary[MaskPolicy, Checkpoints] = WeakKeyDictionary()


def forget_judgements() -> None:
    """Judge every result afresh and replay every frontier in full (the
    benchmarks' cold runs)."""
    _judgements.clear()
    forget_checkpoints()


def forget_checkpoints() -> None:
    """Replay every frontier in full, or from a checkpoint kept after this,
    and mask every request in full (``previous_requests``)."""
    for checkpoints in list(_checkpoints.values()):
        checkpoints.clear()
    forget_previous_requests()


def _frontier(index: ToolTurnIndex, items: Sequence[object], policy: MaskPolicy,
              maskable: dict[int, str], conversation: str | None,
              written_open: bytes | None = None,
              layout: CacheLayout | None = None,
              cold_ends: frozenset[int] = frozenset()) -> Frontier:
    """The frontier of this request, resumed from the checkpoint of an
    earlier request of the conversation when one fits."""
    try:
        checkpoints = _checkpoints.get(policy) or _checkpoints.setdefault(policy, Checkpoints())
    except TypeError:  # a policy built with lists, not tuples: replayed in full
        return Frontier(index, items, policy, maskable, layout=layout, cold_ends=cold_ends)
    written = written_open
    if conversation is not None and written is None:
        written = items_json(items)
    if conversation is None or written is None:
        return Frontier(index, items, policy, maskable, layout=layout, cold_ends=cold_ends)
    frontier = Frontier(index, items, policy, maskable,
                        resume=checkpoints.find(conversation, written), layout=layout,
                        cold_ends=cold_ends)
    checkpoint = frontier.checkpoint(written, closed=written_open is None)
    checkpoints.keep(conversation, checkpoint)
    frontier.items_written = checkpoint.items_json
    return frontier


def _added_breakpoint(frontier: Frontier, items: Sequence[object], layout: CacheLayout | None,
                      plan: MaskPlan) -> AddedBreakpoint | None:
    """The frontier breakpoint, unless its block carries one already (the
    client's) or a result planned for rewriting sits in its item."""
    item = frontier.breakpoint_item()
    if item is None or layout is None or layout.control is None:
        return None
    block = closing_block(items[item])
    control = next_control(items, item, layout.top_level)
    if block is None or control is None or marked(items[item], block) \
            or any(d.location[0] == item for d in plan.decisions):
        return None
    return AddedBreakpoint(item, block, control)


def _judge(result: ToolResult, policy: MaskPolicy, recallable: bool) -> Judgement:
    reason = _static_reason(result, policy)
    if reason is not None:
        return reason, None
    assert result.text is not None
    placeholder = render_placeholder(
        policy.placeholder_template, result.call_id, result.tool_name, len(result.text),
        recall=recallable,
    )
    blocks = preserved_blocks(result.text, policy.preserve_patterns)
    new_text = _masked_text(placeholder, blocks)
    if len(new_text) < len(result.text):
        return None, new_text
    return "short", None  # a placeholder must save something


def _recallable(index: ToolTurnIndex) -> frozenset[str]:
    """The call ids that name one result of the request (some clients reuse
    ids such as call_0 in every turn: a recall of one could not tell which)."""
    counts = Counter(result.call_id for result in index.results)
    return frozenset(call_id for call_id, count in counts.items() if count == 1)


def _static_reason(result: ToolResult, policy: MaskPolicy) -> KeptReason | None:
    """Why a result is never masked, whatever its age (None: it may be)."""
    text = result.text
    if text is None:
        return "not_text"  # nothing masking knows how to replace
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
    frontier: Frontier,
    recallable: frozenset[str],
    recalled: frozenset[Location],
) -> None:
    """The second stage: while the request is still estimated over
    ``max_input_tokens``, clip results inside the window to head + marker +
    tail, oldest first. No message is ever removed. With ``recall``, the
    marker names the call's id: the whole result comes back from the
    request like a masked one."""
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
            or result.location in recalled
            or result.turn < frontier.turn
            or (result.tool_name is not None and result.tool_name in policy.exclude_tools)
        ):
            continue
        clipped = truncate_text(text, policy.clip_head_chars, policy.clip_tail_chars,
                                recall_id=result.call_id if result.call_id in recallable
                                else None)
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
