"""What a rewritten request leaves for the conversation's next one: the
request as it went out, kept by the fast path (``reuse``)."""

from __future__ import annotations

from collections.abc import Sequence

from obsmask_core.conversation.billing.breakpoints import CacheLayout
from obsmask_core.conversation.masking.outcomes import Masked, RewriteOutcome, Unchanged
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.reuse.hint import (
    QuickRead,
    Reuse,
    document_of,
    document_reader,
    settled_name,
)
from obsmask_core.conversation.reuse.previous_requests import PreviousRequests
from obsmask_core.conversation.reuse.proven_spans import ProvenSpans
from obsmask_core.conversation.reuse.records import (
    Kept,
    KeptAnswer,
    MaskedEnd,
    PreviousRequest,
)
from obsmask_core.conversation.turns.tool_turns import IndexedItems
from obsmask_core.conversation.turns.wire_formats import WireFormat


def keep_request(previous: PreviousRequests, request: QuickRead, fmt: WireFormat, *,
                 recall: bool, end: int, plan: MaskPlan, outcome: RewriteOutcome,
                 masked_end: MaskedEnd | None, items: Sequence[object], indexed: IndexedItems,
                 grew_from: PreviousRequest | None, reuse: Reuse | None,
                 layout: CacheLayout | None = None, proven: ProvenSpans | None = None,
                 kept: Kept | None = None, answer: KeptAnswer | None = None) -> None:
    """Keep ``request`` in ``previous`` for the next request, in place of
    the one it grew from (``grew_from``: it is this one's past, even when
    this one was masked anew), when it went out masked or unchanged and the
    frontier's checkpoint wrote its items (``plan.items_written``).
    ``proven``: the spans of its values a parse proved (``proven_spans``);
    ``kept``: what its other members gave (``records.Kept``); ``answer``:
    what a retry of it is answered (``records.KeptAnswer``)."""
    if plan.items_written is None or not isinstance(outcome, Masked | Unchanged):
        return
    masked = isinstance(outcome, Masked)
    previous.keep(
        PreviousRequest(
            fmt=fmt.name, recall=recall, body=request.body, end=end, items=len(items),
            written=plan.items_written,
            signature=masked_end.signature if masked and masked_end is not None else (),
            masked=outcome.body if masked and masked_end is not None else None,
            masked_end=masked_end.end if masked_end is not None else 0,
            placed=masked_end.placed if masked and masked_end is not None else None,
            in_a_row=grew_from.in_a_row + 1 if grew_from is not None else 1,
            # Proven by its own read, or by the check of its masked body:
            # that parse proved where the masked list closes, and the masked
            # body is this one with whole values replaced before that point
            # and the same bytes after it.
            end_proven=request.list_end is not None or masked_end is not None,
            conversation=settled_name(plan, reuse, items), session=plan.session,
            layout=layout,
            proven=proven or {}, kept=kept or Kept(), answer=answer),
        replaces=grew_from, document=document_of(request), indexed=indexed,
        judgements=plan.judgements if not recall else (),
        read_document=document_reader(request))
