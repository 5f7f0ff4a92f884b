"""Mask a whole request body: bytes in, a tagged outcome out, never an exception.

The pipeline is parse -> plan -> splice -> verify. Only the values chosen by
the plan are replaced in the original body; every other byte stays as the
client sent it. The new body is then parsed again and checked against the
rules of masking (``invariants``): a body that fails is never sent. The body
is read quickly first and exactly when that does not do (``request_body``).

A request that only adds items to the conversation's previous one, and for
which the plan makes the previous request's replacements, goes out as the
previous masked body (checked when it was made) with the new items' bytes:
``previous_requests`` says why that body is right.
"""

from __future__ import annotations

from collections.abc import Sequence

from obsmask_core.conversation.billing.breakpoints import CACHE_CONTROL, CacheLayout, read_layout
from obsmask_core.conversation.billing.last_seen import Arrival, cache_lifetime
from obsmask_core.conversation.billing.price_models import has_cache
from obsmask_core.conversation.body.request_body import (
    Edit,
    ExactBody,
    MemberAdded,
    QuickBody,
    Replacement,
    RequestBody,
    added_items,
)
from obsmask_core.conversation.body.request_text import UnsupportedBody
from obsmask_core.conversation.masking.invariants import check_only_planned_changes
from obsmask_core.conversation.masking.outcomes import (
    Masked,
    Refused,
    RewriteOutcome,
    Unchanged,
    Unreadable,
)
from obsmask_core.conversation.masking.recall import Recall, find_recalls, with_recalls
from obsmask_core.conversation.planning.checkpoints import items_json
from obsmask_core.conversation.planning.holdout import (
    ConversationName,
    conversation_name,
    named_by_user_message,
)
from obsmask_core.conversation.planning.planner import (
    RECALLED,
    MaskDecision,
    MaskPlan,
    plan_masking,
)
from obsmask_core.conversation.reuse.grown_body import GrownBody
from obsmask_core.conversation.reuse.previous_requests import (
    Grown,
    PreviousRequest,
    PreviousRequests,
    Signature,
    previous_requests,
)
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.tool_turns import IndexedItems
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, WireFormat, value_at

DISABLED = "masking is disabled"
HELD_OUT = "the conversation is in the holdout group (holdout_percent)"

# A body read quickly, exactly, or as grown from a kept request; the first
# and the last are read by orjson, and kept for the next request.
ReadBody = RequestBody | GrownBody
QuickRead = QuickBody | GrownBody


def mask_request_body(
    body: bytes, policy: MaskPolicy, fmt: WireFormat = CHAT, *, recall: bool = False,
    visit: Arrival | None = None,
) -> RewriteOutcome:
    """Mask old tool results in a request body of format ``fmt``. With
    ``recall``, the recall stubs among its results are replaced by the text
    they ask for first (``recall``), and masking plans on the conversation
    as it will then go out. With ``visit`` (the table of when conversations
    were last seen, and the request's time), the conversation's cold ends
    (``last_seen``) are billed as cold, when ``cold_after_seconds`` is set."""
    if not policy.enabled:
        return Unchanged(DISABLED)
    kept = previous_requests(policy)
    grown = kept.grown_from(body, fmt.name, recall) if kept is not None else None
    try:
        quick = _read_grown(body, fmt, grown) if grown is not None else None
        if quick is None:
            quick = QuickBody.read(body, fmt.list_member,
                                   grown.end if grown is not None else None)
        outcome = mask_read_body(quick, policy, fmt, recall, grown, kept, visit) \
            if quick is not None else None
    except (RecursionError, ValueError):
        # orjson reads nesting Python cannot compare (past ~1000 levels):
        # the exact reader refuses such a body with its reason.
        outcome = None
    # A value the quick reader could not place, or placed wrongly (the
    # check saw it): the exact reader decides.
    if outcome is not None and not isinstance(outcome, Refused):
        return outcome
    try:
        exact = ExactBody.read(body, fmt.list_member)
    except UnsupportedBody as e:
        return Unreadable(str(e))
    return mask_read_body(exact, policy, fmt, recall, visit=visit)


def _read_grown(body: bytes, fmt: WireFormat, grown: Grown) -> QuickRead | None:
    """``body`` read as the kept request it grew from and its added items:
    from that request's document when it is kept (``QuickBody.grown``),
    else without reading that request's items (``GrownBody``) when its read
    proved where its list closes and its index resumes."""
    previous = grown.previous
    if grown.document is not None:
        return QuickBody.grown(body, fmt.list_member, grown.document, grown.start, grown.end)
    if previous.end_proven and grown.indexed is not None:
        return GrownBody.read(body, fmt.list_member, previous.items, grown.start, grown.end)
    return None


def mask_read_body(request: ReadBody, policy: MaskPolicy, fmt: WireFormat,
                   recall: bool = False, grown: Grown | None = None,
                   kept: PreviousRequests | None = None,
                   visit: Arrival | None = None) -> RewriteOutcome:
    """Plan, splice and check a body already read (quickly or exactly).
    With ``grown``, the body may be that previous request with items added
    (``previous_requests``); a body read quickly is kept in ``kept`` for the
    next request. ``visit``: as ``mask_request_body``'s (a body read twice
    visits twice, at the same time: the second finds what the first did)."""
    # The items it adds to the request it grew from, when it is that
    # request with items added: its index is then resumed from that one's.
    added = _added_items(request, grown) if kept is not None and grown is not None \
        and isinstance(request, QuickRead) else None
    resume = _resume(grown) if grown is not None and added is not None else None
    indexed = fmt.index_items(request.items, resume)
    index, chars = indexed.index, indexed.text_chars
    recalls = find_recalls(index) if recall else []
    items = request.items
    if recalls:
        items = with_recalls(request.items, recalls, fmt)
        index = fmt.index(items)
    # What a request kept for the next one needs: a body read quickly, as it
    # is (recalled texts change the items the plan sees).
    keeping = kept is not None and isinstance(request, QuickRead) and not recalls
    # The request it grew from is kept no longer, even when this one is
    # masked anew: it is this one's past.
    grew_from = grown.previous if grown is not None else None
    if not keeping or added is None:
        grown, added = None, None
    name = grown.previous.conversation if grown is not None else None
    layout = _layout(request, items, policy, fmt)
    cold_ends: frozenset[int] = frozenset()
    if visit is not None and policy.cold_after_seconds and has_cache(policy.price_model):
        if name is None:
            name = conversation_name(items)
        if name is not None:
            cold_ends = visit.of(name.id, len(items),
                                 _lifetime(request, policy, fmt, layout))
    plan = plan_masking(index, policy, items, recall=recall,
                        recalled=frozenset(r.location for r in recalls),
                        written_open=_written_open(grown, added),
                        name=name,
                        judged_before=grown.judgements
                        if grown is not None and resume is not None and not recall else (),
                        layout=layout, cold_ends=cold_ends)
    end = _list_end(request, fmt) if keeping else None
    masked_end: int | None = None
    if plan.held_out and not recalls:
        outcome: RewriteOutcome = Unchanged(HELD_OUT, plan)
    else:
        outcome, masked_end = _masked(request, plan, fmt, recalls, chars, grown, end)
    if keeping and kept is not None and plan.items_written is not None and end is not None \
            and isinstance(request, QuickRead) \
            and isinstance(outcome, Masked | Unchanged):
        kept.keep(PreviousRequest(
            fmt.name, recall, request.body, end, len(items), plan.items_written,
            _signature(plan) if isinstance(outcome, Masked) else (),
            outcome.body if isinstance(outcome, Masked) and masked_end is not None else None,
            masked_end or 0, grew_from.in_a_row + 1 if grew_from is not None else 1,
            _end_proven(request, masked_end), _settled_name(plan, grown, items)),
            grew_from, _document_of(request), indexed, plan.judgements if not recall else ())
    return outcome


def _layout(request: ReadBody, items: Sequence[object], policy: MaskPolicy,
            fmt: WireFormat) -> CacheLayout | None:
    """An Anthropic request's breakpoints, when the ledger or the frontier
    breakpoint needs them."""
    if fmt is not ANTHROPIC or not (policy.frontier_breakpoint
                                    or has_cache(policy.price_model)):
        return None
    return read_layout(request.members, items)


def _lifetime(request: ReadBody, policy: MaskPolicy, fmt: WireFormat,
              layout: CacheLayout | None) -> int:
    """How long the conversation must have been unseen for this request to
    find the provider's cache expired (``last_seen.cache_lifetime``)."""
    return cache_lifetime(policy.cold_after_seconds, anthropic=fmt is ANTHROPIC,
                          long_lived=layout is not None and layout.long_lived,
                          retention=request.members.get("prompt_cache_retention"))


def _end_proven(request: QuickRead, masked_end: int | None) -> bool:
    """Is it proven that the request's list closes where it was kept as
    closing? By its own read, or by the check of its masked body: that
    parse proved where the masked list closes (``masked_end``), and the
    masked body is this one with whole values replaced by whole values
    before that point and the same bytes after it, so a reader is in the
    same place at both points."""
    return request.list_end is not None or masked_end is not None


def _settled_name(plan: MaskPlan, grown: Grown | None,
                  items: Sequence[object]) -> ConversationName | None:
    """The conversation's name, when a user message among the items gave
    it: the previous request's, or this one's items say so."""
    if grown is not None and grown.previous.conversation is not None:
        return grown.previous.conversation
    return plan.name if named_by_user_message(items) else None


def _document_of(request: QuickRead) -> dict[str, object] | None:
    """The body as orjson read it, to keep for the next request, when the
    read proved where its list closes (a grown body's, if it was read)."""
    if isinstance(request, GrownBody):
        return request.document
    return request.members if request.list_end is not None else None


def _masked(request: ReadBody, plan: MaskPlan, fmt: WireFormat, recalls: list[Recall],
            chars: int, grown: Grown | None, end: int | None,
            ) -> tuple[RewriteOutcome, int | None]:
    """The outcome of ``plan``: the body with its replacements, made anew
    or (``grown``) from the previous request's masked body; and where the
    masked body's list closes, when that is proven (the list closing at
    ``end`` in the body, every replacement before it)."""
    chars_after = chars - sum(len(d.original) - len(d.new_text) for d in plan.decisions)
    _add_recalls(plan, recalls)
    if not plan.decisions:
        return Unchanged("nothing to mask", plan), None
    chars_after += sum(len(r.text) - len(r.stub) for r in recalls)
    previous = grown.previous if grown is not None else None
    if grown is not None and previous is not None and previous.masked is not None \
            and isinstance(request, QuickRead) \
            and _signature(plan) == previous.signature:
        # The previous request's replacements, all in the items both share:
        # its masked body up to where its list closes, then this one's bytes.
        grown_body = previous.masked if request.body == previous.body else b"".join(
            (memoryview(previous.masked)[:previous.masked_end],
             memoryview(request.body)[grown.start:]))
        return (Masked(grown_body, plan, chars, chars_after, reused=True),
                previous.masked_end + grown.end - grown.start)

    replacements: list[Edit] = [
        Replacement(d.location[0], fmt.value_path(d.location), d.original_value,
                    fmt.replacement(d.original_value, d.new_text))
        for d in plan.decisions]
    if (added := plan.breakpoint) is not None:
        replacements.append(MemberAdded(
            added.item, ("content", added.block),
            value_at([request.items[added.item]], 0, ("content", added.block)),
            CACHE_CONTROL, dict(added.control)))
    new_body = request.replaced(replacements)
    if new_body is None:
        return Refused("a planned value could not be located", plan), None
    # Every replacement before the list's end: the rest of the body is the
    # client's, and the check proves where the masked list closes.
    masked_end = None
    if end is not None and isinstance(request, QuickRead) \
            and new_body.endswith(request.body[end:]):
        masked_end = end + len(new_body) - len(request.body)
    violation, proven = _verify(request, new_body, replacements, plan, fmt, masked_end)
    if violation is not None:
        return Refused(violation, plan), None
    return Masked(new_body, plan, chars, chars_after), masked_end if proven else None


def _resume(grown: Grown) -> IndexedItems | None:
    """The index to resume the request's from: the kept request's, when the
    request is proven to be that one with items added (``_added_items``):
    its first items read as that one's. Its results' judgements go with
    it (``Grown.judgements``)."""
    resume = grown.indexed
    return resume if resume is not None and resume.items == grown.previous.items else None


def _added_items(request: QuickRead, grown: Grown) -> list[object] | None:
    """The items ``request`` adds to the previous request it grew from, or
    None if it is not that request with items added: its read must have
    proven that its list closes right after them, and the bytes between
    must be ``,`` and items that parse on their own."""
    count = grown.previous.items
    if request.list_end != grown.end or len(request.items) < count:
        return None
    if request.kept_items == count:
        return request.items[count:]  # read from that request's document
    new = added_items(grown.added(request.body))
    if new is None or request.items[count:] != new:
        return None
    return new


def _written_open(grown: Grown | None, added: list[object] | None) -> bytes | None:
    """orjson's writing of the items without the closing bracket, when the
    body grew from a kept request: that one's with the added items'
    appended (None: the planner writes them)."""
    if grown is None or added is None:
        return None
    if not added:
        return grown.previous.written
    more = items_json(added)
    if more is None:
        return None
    return b"".join((grown.previous.written, b",", memoryview(more)[1:-1]))


def _list_end(request: ReadBody, fmt: WireFormat) -> int | None:
    """Where the list of a body read quickly closes: proven by its read,
    or guessed (the check of its masked body, or the next request's read,
    proves it)."""
    if isinstance(request, GrownBody):
        return request.list_end
    if not isinstance(request, QuickBody):
        return None
    if request.list_end is not None:
        return request.list_end
    return request.guess_list_end(fmt.list_member)


def _signature(plan: MaskPlan) -> Signature:
    signature: Signature = tuple((d.location, d.new_text, d.kind) for d in plan.decisions)
    if (added := plan.breakpoint) is not None:
        signature += (((added.item, added.block), repr(sorted(added.control.items())),
                       "breakpoint"),)
    return signature


def _add_recalls(plan: MaskPlan, recalls: list[Recall]) -> None:
    """A decision for each recalled result that masking leaves whole (one it
    masks goes out as its placeholder: the plan's decision says so)."""
    planned = {d.location for d in plan.decisions}
    plan.decisions.extend(
        MaskDecision(location=r.location, call_id=r.call_id, tool_name=r.tool_name,
                     original=r.stub, original_value=r.stub_value, new_text=r.text,
                     kind=RECALLED)
        for r in recalls if r.location not in planned)


def _verify(
    request: ReadBody,
    new_body: bytes,
    replacements: list[Edit],
    plan: MaskPlan,
    fmt: WireFormat,
    end: int | None = None,
) -> tuple[str | None, bool]:
    """Parse the masked body again: the rules must hold, and the result must
    be exactly the original with the planned values replaced.

    The rules check finds every item equal to the original's once the
    planned values are blanked on both sides; what remains is that each
    planned value is the one planned. Together that is the whole list
    equal to the original with the plan applied, without comparing the
    whole list a second time. The second of the pair: whether the masked
    list proved to close at ``end``."""
    try:
        after, proven = request.parse_again(new_body, fmt.list_member, end)
    except (ValueError, RecursionError) as e:
        return f"masked body is not valid JSON ({e})", False
    violation = _violation(request, after, replacements, plan, fmt)
    return violation, proven and violation is None


def _violation(request: ReadBody, after: object, replacements: list[Edit],
               plan: MaskPlan, fmt: WireFormat) -> str | None:
    members = request.members
    if not isinstance(after, dict) or after.keys() != members.keys():
        return "masked body has different top-level members"
    for key, value in members.items():
        if key != fmt.list_member and after[key] != value:
            return f"top-level member {key!r} changed"
    items = after[fmt.list_member]
    if not isinstance(items, list):
        return f"masked body has no {fmt.list_member} list"
    problems = check_only_planned_changes(request.items, items, plan, fmt)
    if problems:
        return "; ".join(problems[:3])
    for replacement in replacements:
        try:
            value = value_at(items, replacement.index, replacement.path)
        except (TypeError, KeyError, IndexError):
            return "masked values differ from the plan"
        if value != replacement.new:
            return "masked values differ from the plan"
    return None
