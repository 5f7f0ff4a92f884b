"""Mask a whole request body: bytes in, a tagged outcome out, never an exception.

The pipeline is parse -> index -> plan -> splice -> verify. Only the values
chosen by the plan are replaced in the original body; every other byte
stays as the client sent it. The new body is then parsed again and checked
against the rules of masking (``verify``): a body that fails is never sent.
Where every value the plan replaces sits at a place a parse proved
(``reuse.proven_spans``: the check of an earlier body, or a second read of
the items a body added), the splice needs no check: it keeps the rules by
construction.
The body is read quickly first and exactly when that does not do
(``body.request_body``).

What a masker keeps between requests (``masker``) only saves work: the
plan's judgements and checkpoints (``planning.memory``), and the previous
request of each conversation (``reuse``), whose one hint (``reuse.hint.
Reuse``) lets a body that only adds items to it be read, indexed, planned
and spliced from it. Without them, the same outcome comes, later.
"""

from __future__ import annotations

from collections.abc import Sequence

from obsmask_core.conversation.billing.breakpoints import (
    DEFAULT_MINIMUM_TOKENS,
    CacheLayout,
    grown_layout,
    read_layout,
)
from obsmask_core.conversation.billing.history_key import HistoryDigest
from obsmask_core.conversation.billing.last_seen import Arrival, Sighting, TableVisit
from obsmask_core.conversation.billing.price_models import has_cache
from obsmask_core.conversation.billing.request_price import RequestPrice, price_for_request
from obsmask_core.conversation.billing.terms import BillingTerms
from obsmask_core.conversation.body.quick_body import QuickBody
from obsmask_core.conversation.body.request_body import (
    ExactBody,
)
from obsmask_core.conversation.body.request_text import UnsupportedBody
from obsmask_core.conversation.masking.keep import keep_request
from obsmask_core.conversation.masking.masked_body import masked_outcome
from obsmask_core.conversation.masking.outcomes import (
    Masked,
    Refused,
    RewriteOutcome,
    Unchanged,
    Unreadable,
)
from obsmask_core.conversation.masking.recall import find_recalls, with_recalls
from obsmask_core.conversation.masking.retry import answer_again
from obsmask_core.conversation.masking.sighting import sighting_of, table_visit
from obsmask_core.conversation.masking.verify import ReadBody
from obsmask_core.conversation.planning.memory import PlanMemory
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.planning.plan_hint import PlanHint
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.reuse.hint import (
    QuickRead,
    Reuse,
    list_end,
    read_grown,
    reuse_of,
)
from obsmask_core.conversation.reuse.previous_requests import PreviousRequests
from obsmask_core.conversation.reuse.records import (
    Grown,
    Kept,
    KeptAnswer,
    MaskedEnd,
)
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, WireFormat

DISABLED = "masking is disabled"
HELD_OUT = "the conversation is in the holdout group (holdout_percent)"


def mask_request_body(
    body: bytes, policy: MaskPolicy, fmt: WireFormat = CHAT, *, recall: bool = False,
    visit: Arrival | None = None, memory: PlanMemory | None = None,
    previous: PreviousRequests | None = None,
) -> RewriteOutcome:
    """Mask old tool results in a request body of format ``fmt``. With
    ``recall``, the recall stubs among its results are replaced by the text
    they ask for first (``recall``), and masking plans on the conversation
    as it will then go out. With ``visit`` (the table of when conversations
    were last seen, and the request's time), the conversation's cold ends
    (``last_seen``) are billed as cold, when ``cold_after_seconds`` is set.
    ``memory`` and ``previous``: what a masker keeps (see the module)."""
    if not policy.enabled:
        return Unchanged(DISABLED)
    grown = previous.grown_from(body, fmt.name, recall, fmt.list_member) \
        if previous is not None else None
    if grown is not None and (again := answer_again(grown, policy, visit)) is not None:
        return again
    try:
        quick = read_grown(body, fmt, grown) if grown is not None else None
        if quick is None:
            quick = QuickBody.read(body, fmt.list_member,
                                   grown.end if grown is not None else None)
        outcome = mask_read_body(quick, policy, fmt, recall, grown=grown, visit=visit,
                                 memory=memory, previous=previous) \
            if quick is not None else None
    except (RecursionError, ValueError):
        # orjson reads nesting Python cannot compare: the exact reader
        # refuses such a body with its reason.
        outcome = None
    # A value the quick reader could not place, or placed wrongly (the
    # check saw it): the exact reader decides.
    if outcome is not None and not isinstance(outcome, Refused):
        return outcome
    try:
        exact = ExactBody.read(body, fmt.list_member)
    except UnsupportedBody as e:
        return Unreadable(str(e))
    return mask_read_body(exact, policy, fmt, recall, visit=visit, memory=memory)


def mask_read_body(request: ReadBody, policy: MaskPolicy, fmt: WireFormat,
                   recall: bool = False, *, grown: Grown | None = None,
                   visit: Arrival | None = None, memory: PlanMemory | None = None,
                   previous: PreviousRequests | None = None) -> RewriteOutcome:
    """Index, plan, splice and check a body already read (quickly or
    exactly). With ``grown``, the body may be that kept request with items
    added; a body read quickly is kept in ``previous`` for the next request.
    ``visit``: as ``mask_request_body``'s (a body read twice visits twice, at
    the same time: the second finds what the first did)."""
    quick = request if previous is not None and isinstance(request, QuickRead) else None
    reuse = reuse_of(quick, grown) if quick is not None and grown is not None else None
    # Index (resumed from the kept request's index when it is kept).
    indexed = fmt.index_items(request.items, reuse.resume if reuse is not None else None)
    index, items = indexed.index, request.items
    recalls = find_recalls(index) if recall else []
    if recalls:
        items = with_recalls(request.items, recalls, fmt)
        index = fmt.index(items)
        # Recalled texts change the items the plan sees: nothing is kept.
        quick, reuse = None, None
    # The values whose place a parse proved: splicing them needs no check.
    proven = reuse.proven_spans(quick.body, index, fmt) \
        if reuse is not None and quick is not None else {}
    # Plan.
    price = _price(request, policy, fmt, reuse)
    layout = _layout(request, items, policy, fmt, price, reuse)
    name = reuse.previous.conversation if reuse is not None else None
    planned = table_visit(request, index.answer_starts, policy, fmt, layout, price, visit,
                          reuse.previous.kept if reuse is not None else None)
    found = sighting_of(visit, planned[0], policy) \
        if planned is not None and visit is not None else Sighting()
    terms = BillingTerms(layout, found.cold_ends, price, found.braked_from,
                         found.doubtful_ends, planned[0].key.own if planned is not None else None)
    plan = plan_masking(index, policy, items, recall=recall,
                        recalled=frozenset(r.location for r in recalls), terms=terms,
                        memory=memory, hint=reuse.plan_hint(recall, name) if reuse is not None
                        else PlanHint(name=name))
    # Splice and verify.
    end = list_end(quick, fmt) if quick is not None else None
    masked_end: MaskedEnd | None = None
    if plan.held_out and not recalls:
        outcome: RewriteOutcome = Unchanged(HELD_OUT, plan)
    else:
        outcome, masked_end = masked_outcome(request, plan, fmt, recalls, indexed.text_chars,
                                      reuse, end, proven, index,
                                      prove=quick is not None and end is not None)
    if quick is not None and previous is not None and end is not None:
        keep_request(previous, quick, fmt, recall=recall, end=end, plan=plan,
                     outcome=outcome, masked_end=masked_end, items=items, indexed=indexed,
                     grew_from=grown.record if grown is not None else None, reuse=reuse,
                     layout=layout, proven=proven,
                     kept=Kept(price=price, priced_by=policy,
                               history=planned[1] if planned is not None else None,
                               lifetime=planned[0].lifetime
                               if planned is not None and fmt is not ANTHROPIC else None),
                     answer=_answer(outcome, policy, visit, planned, found) if not recall
                     else None)
    return outcome


def _price(request: ReadBody, policy: MaskPolicy, fmt: WireFormat,
           reuse: Reuse | None) -> RequestPrice | None:
    """The request's prices, from its ``model`` (None: no cache): the kept
    request's, under the same policy, when the body grew from it (its
    other members are that request's)."""
    if not has_cache(policy.price_model):
        return None
    if reuse is not None and reuse.previous.kept.priced_by is policy:
        return reuse.previous.kept.price
    return price_for_request(policy.price_model, policy.models, anthropic=fmt is ANTHROPIC,
                             model=request.members.get("model"), members=request.members)


def _layout(request: ReadBody, items: Sequence[object], policy: MaskPolicy,
            fmt: WireFormat, price: RequestPrice | None,
            reuse: Reuse | None) -> CacheLayout | None:
    """An Anthropic request's breakpoints, when the ledger or the frontier
    breakpoint needs them: from the kept request's and the added items'
    when the body grew from it (``reuse``), else read from every item."""
    if fmt is not ANTHROPIC or not (policy.frontier_breakpoint
                                    or has_cache(policy.price_model)):
        return None
    minimum = price.minimum_tokens if price is not None else DEFAULT_MINIMUM_TOKENS
    kept = reuse.previous.layout if reuse is not None else None
    if reuse is not None and kept is not None and kept.minimum_tokens == minimum \
            and (grown := grown_layout(kept, reuse.added, reuse.grown.kept is not None)):
        return grown
    return read_layout(request.members, items, minimum_tokens=minimum)


def _answer(outcome: RewriteOutcome, policy: MaskPolicy, visit: Arrival | None,
            planned: tuple[TableVisit, HistoryDigest] | None,
            found: Sighting) -> KeptAnswer | None:
    """What a retry of the request is answered (``retry``), when it went
    out masked or unchanged."""
    plan: MaskPlan | None = None
    if isinstance(outcome, Masked):
        plan, masked, unchanged = outcome.plan, outcome.body, ""
        chars = (outcome.tool_chars_before, outcome.tool_chars_after)
    elif isinstance(outcome, Unchanged):
        plan, masked, unchanged, chars = outcome.plan, None, outcome.reason, (0, 0)
    if plan is None:
        return None
    return KeptAnswer(policy, visit is not None, planned[0] if planned is not None else None,
                      found, plan, masked, unchanged, chars)
