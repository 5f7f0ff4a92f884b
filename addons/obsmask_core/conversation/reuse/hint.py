"""What the conversation's previous request lends the next: the one hint the
fast path hands the rewrite.

An agent sends its whole history again with every request: the next
request is the previous one with a few items added at the end of its list,
byte for byte, and masking mostly plans the same replacements for it (the
frontier moves now and then, not at every request). Its masked body is then
the previous masked body up to where the list closes, followed by the
client's own bytes from there: nothing to search for, splice or parse
again. The body itself need not be read whole either: when the previous
request's read proved where its list closes, the next body is read as that
request's items and its added items, which alone are parsed (from that
request's document, ``body.quick_body.QuickBody.grown``, or with the
older items read only if something asks for them, ``grown_body``), and its
index resumes from that request's.

Why such a body is right without a second parse:

- the previous request P was masked into M, and M was parsed again and
  checked; that parse also proved where M's list closes (``quick_body``
  inserts a marker just before a ``]``: it comes out as the list's last
  element only if that ``]`` closes the list);
- the next request B begins with P's bytes up to where P's list closes and
  ends with P's bytes from there on; what lies between is ``,`` and items
  that parse on their own as a list, and B's own read proved that its list
  closes right after them;
- JSON reads left to right: B reads as P with those items appended to the
  list, nothing else changed, and M with the same bytes inserted at the
  same place reads as M with the same items appended;
- the plan for B makes exactly P's replacements (places, texts, kinds), all
  in P's items: the result is B with those replacements, the body a splice
  and a check would have given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from obsmask_core.conversation.billing.breakpoints import AddedBreakpoint
from obsmask_core.conversation.body.quick_body import QuickBody, added_items
from obsmask_core.conversation.frontier.checkpoints import items_json
from obsmask_core.conversation.planning.holdout import ConversationName, named_by_user_message
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.planning.plan_hint import PlanHint
from obsmask_core.conversation.reuse.grown_body import GrownBody
from obsmask_core.conversation.reuse.proven_spans import Place, candidates, prove_added
from obsmask_core.conversation.reuse.records import (
    Document,
    Grown,
    PreviousRequest,
    Signature,
    SignatureEntry,
)
from obsmask_core.conversation.turns.tool_turns import IndexedItems
from obsmask_core.conversation.turns.turn_model import ToolTurnIndex
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.shared.json_text import Span

# A body read quickly, or as grown from a kept request: both read by orjson,
# and kept for the next request.
QuickRead = QuickBody | GrownBody


def read_grown(body: bytes, fmt: WireFormat, grown: Grown) -> QuickRead | None:
    """``body`` read as the kept request it grew from and its added items:
    from that request's document when it is kept (``QuickBody.grown``),
    else without reading that request's items (``GrownBody``) when its read
    proved where its list closes and its index resumes."""
    if grown.document is not None:
        return QuickBody.grown(body, fmt.list_member, grown.document, grown.start, grown.end)
    if grown.previous.end_proven and grown.indexed is not None:
        return GrownBody.read(body, fmt.list_member, grown.previous.items, grown.start,
                              grown.end)
    return None


@dataclass(frozen=True)
class Reuse:
    """A body proven to be a kept request (``grown.previous``) with items
    added (``added``), and the index to resume its own from (``resume``:
    the kept request's, when it is kept; its results' judgements go with
    it in ``grown.judgements``)."""

    grown: Grown
    added: Sequence[object]
    resume: IndexedItems | None

    @property
    def previous(self) -> PreviousRequest:
        return self.grown.previous

    def plan_hint(self, recall: bool, name: ConversationName | None) -> PlanHint:
        """What the plan may take from the kept request: its items' writing
        with the added ones', and (with the index resumed, and no recall to
        change what an id names) its results' judgements."""
        judged = self.grown.judgements if self.resume is not None and not recall else ()
        previous = self.previous
        return PlanHint(written_open=self._written_open(), judged_before=judged, name=name,
                        session=previous.session,
                        session_from=previous.items if previous.session is None else 0)

    def masked_body(self, body: bytes, signature: Signature) -> tuple[bytes, int] | None:
        """The kept request's masked body up to where its list closes, then
        this body's bytes, and where that body's list closes: when the plan
        makes the kept request's replacements (``signature``)."""
        previous, grown = self.previous, self.grown
        if previous.masked is None or signature != previous.signature:
            return None
        masked = previous.masked if body == previous.body else b"".join(
            (memoryview(previous.masked)[:previous.masked_end],
             memoryview(body)[grown.start:]))
        return masked, previous.masked_end + grown.end - grown.start

    def proven_spans(self, body: bytes, index: ToolTurnIndex,
                     fmt: WireFormat) -> dict[Place, Span]:
        """The spans proven in the kept request (they hold in ``body``, which
        begins with its bytes up to where its list closes), and those of
        the added items' values, proven now (``proven_spans``)."""
        proven = dict(self.previous.proven)
        first = self.previous.items
        if self.added:
            proven.update(prove_added(body, self.grown.start, self.grown.end, self.added, first,
                                      candidates(self.added, first, index, fmt)))
        return proven

    def _written_open(self) -> bytes | None:
        """orjson's writing of the items without the closing bracket: the
        kept request's with the added items' appended."""
        if not self.added:
            return self.previous.written
        more = items_json(self.added)
        if more is None:
            return None
        return b"".join((self.previous.written, b",", memoryview(more)[1:-1]))


def reuse_of(request: QuickRead, grown: Grown) -> Reuse | None:
    """``request`` as the kept request it grew from with items added, or
    None if it is not proven to be that: its read must have proven that its
    list closes right after the added items, and the bytes between must be
    ``,`` and items that parse on their own."""
    count = grown.previous.items
    if request.list_end != grown.end or len(request.items) < count:
        return None
    if request.kept_items == count:
        added: Sequence[object] = request.items[count:]  # read from that request's document
    else:
        new = added_items(grown.added(request.body))
        if new is None or request.items[count:] != new:
            return None
        added = new
    resume = grown.indexed
    if resume is not None and resume.items != count:
        resume = None
    return Reuse(grown, added, resume)


def signature_of(plan: MaskPlan) -> Signature:
    """The plan's replacements, in order: (place, new text, kind)."""
    signature: Signature = tuple((d.location, d.new_text, d.kind) for d in plan.decisions)
    if (added := plan.breakpoint) is not None:
        signature += (breakpoint_entry(added),)
    return signature


def breakpoint_entry(added: AddedBreakpoint) -> SignatureEntry:
    """The frontier breakpoint's entry in a plan's signature."""
    return (added.item, added.block), repr(sorted(added.control.items())), "breakpoint"


def settled_name(plan: MaskPlan, reuse: Reuse | None,
                 items: Sequence[object]) -> ConversationName | None:
    """The conversation's name, when a user message among the items gave
    it: the kept request's, or this one's items say so."""
    if reuse is not None and reuse.previous.conversation is not None:
        return reuse.previous.conversation
    return plan.name if named_by_user_message(items) else None


def document_of(request: QuickRead) -> dict[str, object] | None:
    """The body as orjson read it, to keep for the next request, when the
    read proved where its list closes (a grown body's, if it was read)."""
    if isinstance(request, GrownBody):
        return request.document
    return request.members if request.list_end is not None else None


def document_reader(request: QuickRead) -> Callable[[], Document | None] | None:
    """For a grown body not read whole: what reads it whole (once; None if
    it does not read as its kept and added items), for ``PreviousRequests.keep``
    to call when it would keep the document."""
    if not isinstance(request, GrownBody) or request.document is not None:
        return None
    items = request.items

    def read() -> Document | None:
        try:
            return items.read_document()
        except ValueError:
            return None

    return read


def list_end(request: QuickRead, fmt: WireFormat) -> int | None:
    """Where the list closes: proven by its read, or guessed (the check of
    its masked body, or the next request's read, proves it)."""
    if isinstance(request, GrownBody) or request.list_end is not None:
        return request.list_end
    return request.guess_list_end(fmt.list_member)
