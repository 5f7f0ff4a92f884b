"""Which old tool results to mask or clip in one request, and why the others stay.

The plan works on the format-independent tool-turn model: results of tool
turns older than the window and past the frontier are masked, unless a rule
keeps them (an error, the last K of a tool, an excluded tool, too short...);
then, if the request is still over its budget, results inside the window are
clipped to head + marker + tail. No item is ever added, removed or moved.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

from obsmask_core.conversation.billing.breakpoint_billing import BreakpointBilling
from obsmask_core.conversation.billing.breakpoints import (
    AddedBreakpoint,
    CacheLayout,
    marked,
    next_control,
)
from obsmask_core.conversation.billing.ledger import Prediction, prefix_tokens
from obsmask_core.conversation.billing.terms import PLAIN_TERMS, BillingTerms
from obsmask_core.conversation.frontier.checkpoints import items_json
from obsmask_core.conversation.frontier.frontier import Frontier
from obsmask_core.conversation.frontier.refetch import refetch_facts
from obsmask_core.conversation.frontier.replay_checkpoint import marks_from
from obsmask_core.conversation.planning.clipping import clip
from obsmask_core.conversation.planning.holdout import conversation_name, session_id
from obsmask_core.conversation.planning.judgements import Judgement, KeptReason
from obsmask_core.conversation.planning.judging import judge, recallable_ids
from obsmask_core.conversation.planning.memory import Judgements, PlanMemory
from obsmask_core.conversation.planning.plan import MaskDecision, MaskPlan
from obsmask_core.conversation.planning.plan_hint import NO_HINT, PlanHint
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.turn_model import Location, ToolTurnIndex


def plan_masking(
    index: ToolTurnIndex, policy: MaskPolicy, items: Sequence[object] = (),
    *, recall: bool = False, recalled: frozenset[Location] = frozenset(),
    terms: BillingTerms = PLAIN_TERMS, hint: PlanHint = NO_HINT,
    memory: PlanMemory | None = None,
) -> MaskPlan:
    """The plan for one request: which old results are masked (older than the
    window and past the frontier, and no rule keeps them), then which recent
    ones are clipped if the request is still over its budget.

    ``items`` (the conversation list) is needed by the rules that measure
    the request: ``trigger_tokens``, ``min_free_percent``, ``max_input_tokens``.
    With ``recall``, placeholders and clip markers say how to get the text
    back (unless the call's id names several results of the request: a
    recall could not tell which); the ``recalled`` results are never
    clipped (the model asked for them whole). ``hint`` is what the
    conversation's previous request lends this one's plan when this one
    only adds items to it (``PlanHint``); ``memory`` the judgements and
    checkpoints kept under ``policy`` (without one, every result is judged
    afresh and the frontier replayed in full: the same plan). ``terms``:
    what the ledger bills the request under (``BillingTerms``); with an
    Anthropic layout the plan may add the frontier breakpoint
    (``MaskPlan.breakpoint``).
    """
    name = hint.name if hint.name is not None else conversation_name(items)
    plan = MaskPlan(tool_turns=len(index.turns), tool_results=len(index.results),
                    conversation=name.id if name is not None else None, name=name,
                    session=hint.session if hint.session is not None
                    else session_id(items, hint.session_from))
    plan.kept["orphan"] = len(index.orphans)
    plan.kept_at.update((location, "orphan") for location in index.orphans)
    if not policy.enabled or policy.window_turns <= 0:
        return plan
    if name is not None and name.held_out(policy.holdout_percent):
        # Never masked, but billed like the others, so the two groups' bills
        # can be compared (with nothing maskable both bills are the same).
        plan.held_out = True
        plan.bill = Frontier(index, items, policy, {}, terms=terms).bill()
        return plan

    # Only results older than the window can ever be masked; for them the
    # rules that depend on the result alone (the error heuristic reads the
    # whole text) are applied once: number -> reason kept, or masked text.
    recallable = recallable_ids(index) if recall else frozenset()
    first_in_window = max(0, len(index.turns) - policy.window_turns)
    reasons: dict[int, KeptReason] = {}
    maskable: dict[int, str] = {}
    judged = memory.judgements if memory is not None else Judgements()
    judged_before = hint.judged_before
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
                judgement = judge(result, policy, recallable_id)
                judged.put(key, judgement)
        judgements[number] = judgement
        if judgement[0] is not None:
            reasons[number] = judgement[0]
        else:
            maskable[number] = judgement[1]

    frontier, unmarked = _frontier(index, items, policy, maskable, plan.conversation,
                                   hint.written_open, terms, memory)
    plan.frontier_turn = frontier.turn
    plan.items_written = frontier.items_written
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
        clip(plan, index, items, policy, frontier, recallable, recalled)
    if plan.masked:
        plan.breakpoint = _added_breakpoint(frontier, items, terms.layout, plan, unmarked)
    plan.bill = frontier.bill(_prediction(frontier, plan))
    return plan


def _prediction(frontier: Frontier, plan: MaskPlan) -> Prediction | None:
    """What the provider should report for this request (tokens read from
    the cache, written to it, and in all), counted on the request as it
    goes out: the ledger's entries are the boundaries of this request
    (nothing before them changed since they were written), and the tokens
    up to each are its characters, the planned texts in place, by the same
    estimate (under Anthropic's cache; under another, None: the ledger's
    own estimate stays)."""
    points = frontier.prediction_points()
    billing = frontier.ledger.billing if frontier.ledger is not None else None
    if points is None or not isinstance(billing, BreakpointBilling):
        return None
    chars = frontier.chars_before
    # The change in characters before each item boundary: summed once, in
    # the order of the items, for the three boundaries asked.
    changes = sorted((d.location[0], len(d.new_text) - len(d.original)) for d in plan.decisions)
    items = [item for item, _ in changes]
    changed_before = list(itertools.accumulate((change for _, change in changes), initial=0))

    def tokens(boundary: int | None) -> int:
        if boundary is None:
            return 0
        changed = changed_before[bisect.bisect_left(items, boundary)]
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
    return read, max(0, written - read), tokens(len(chars) - 1)


def _frontier(index: ToolTurnIndex, items: Sequence[object], policy: MaskPolicy,
              maskable: dict[int, str], conversation: str | None,
              written_open: bytes | None, terms: BillingTerms,
              memory: PlanMemory | None) -> tuple[Frontier, bool]:
    """The frontier of this request, resumed from the checkpoint of an
    earlier request of the conversation when one fits (``memory``)."""
    if memory is None or conversation is None:
        return Frontier(index, items, policy, maskable, terms=terms), False
    checkpoints = memory.checkpoints
    written = written_open if written_open is not None else items_json(items)
    if written is None:
        return Frontier(index, items, policy, maskable, terms=terms), False
    resume = checkpoints.find(conversation, written)
    frontier = Frontier(index, items, policy, maskable, resume=resume, terms=terms)
    closed = written_open is None
    items_end = len(written) - closed
    # Searched only where it may spare reading the older items.
    looks = _only_mark_closes(terms.layout)
    checkpoint = frontier.checkpoint(written, closed=closed, marks_from=marks_from(
        written, items_end, resume) if looks else -1)
    checkpoints.keep(conversation, checkpoint)
    frontier.items_written = checkpoint.items_json
    return frontier, looks and checkpoint.marks_from == len(checkpoint.items_json)


def _added_breakpoint(frontier: Frontier, items: Sequence[object], layout: CacheLayout | None,
                      plan: MaskPlan, unmarked: bool) -> AddedBreakpoint | None:
    """The frontier breakpoint, unless its block carries one already (the
    client's) or a result planned for rewriting sits in its item.
    ``unmarked``: the client's one breakpoint among the messages is in the
    last one (``_only_mark_closes``) and orjson's writing of the items names
    no other ``cache_control`` (``marks_from``, which keeps every one whose
    value is not a flat object; the layout counts those that are, on
    blocks). Then no earlier block carries one, and the first after any
    earlier item is that one (``layout.control``): the older items need not
    be read to tell (a body grown from a kept request is not read whole for
    it)."""
    place = frontier.breakpoint_place()
    if place is None or layout is None or layout.control is None:
        return None
    item, block = place
    if any(d.location[0] == item for d in plan.decisions):
        return None
    if unmarked:
        return AddedBreakpoint(item, block, layout.control)
    control = next_control(items, item, layout.top_level)
    if control is None or marked(items[item], block):
        return None
    return AddedBreakpoint(item, block, control)


def _only_mark_closes(layout: CacheLayout | None) -> bool:
    """Does the client's one breakpoint among the messages sit in the last
    one, with no top-level one (Claude Code's moving breakpoint)?"""
    return (layout is not None and layout.top_level is None and layout.in_messages == 1
            and layout.marks_end)
