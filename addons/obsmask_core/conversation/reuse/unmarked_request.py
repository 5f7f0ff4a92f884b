"""A kept request as its client's next request holds it when the client
moves its breakpoint on (Claude Code): without the ``cache_control``
member that ends its latest item (``closing_mark``)."""

from __future__ import annotations

from dataclasses import replace

from obsmask_core.conversation.body.closing_mark import closing_mark
from obsmask_core.conversation.reuse.proven_spans import shifted
from obsmask_core.conversation.reuse.records import PlacedEdit, PreviousRequest
from obsmask_core.shared.json_text import Span


def unmarked_request(previous: PreviousRequest,
                     body: bytes) -> tuple[PreviousRequest, int] | None:
    """``previous`` without the member, in its body and its masked body
    alike, and how many of its first bytes the next ``body`` was found to
    begin with (those before the member); None when it has none there, or
    when ``body`` does not begin with them. Made when asked, not kept: a
    copy of both bodies that the bound on kept bytes does not count, which
    the check on ``body`` spares for the requests of the other
    conversations that share its start (the bytes just before the member
    first: ``PreviousRequest.unmarked_probe``)."""
    probe = previous.unmarked_probe
    if probe is None:
        return None
    span, before_at, before = probe
    if not body.startswith(before, before_at) \
            or not body.startswith(memoryview(previous.body)[:span[0]]):
        return None
    mark = previous.body[span[0]:span[1]]
    masked, masked_end = previous.masked, previous.masked_end
    if masked is not None:
        masked_span = closing_mark(masked, masked_end)
        if masked_span is None or masked[masked_span[0]:masked_span[1]] != mark:
            return None
        masked = _without(masked, masked_span)
        masked_end -= len(mark)
    return replace(previous, body=_without(previous.body, span),
                   end=previous.end - len(mark), masked=masked, masked_end=masked_end,
                   proven=shifted(previous.proven, span), answer=None,
                   placed=_placed_shifted(previous.placed, span)), span[0]


def _without(body: bytes, cut: Span) -> bytes:
    """``body`` without the bytes of ``cut``: one copy, not three."""
    view = memoryview(body)
    return b"".join((view[:cut[0]], view[cut[1]:]))


def _placed_shifted(placed: tuple[PlacedEdit, ...] | None,
                    cut: Span) -> tuple[PlacedEdit, ...] | None:
    """The placed edits once the bytes of ``cut`` are taken out of the body;
    None when one of them holds any of those bytes."""
    if placed is None:
        return None
    # In the order of their spans, which do not overlap: the last ends last.
    if not placed or (placed[-1][1][1] <= cut[0] and placed[-1][1][0] < cut[0]):
        return placed
    removed = cut[1] - cut[0]
    kept: list[PlacedEdit] = []
    for entry, (start, end), written in placed:
        if end <= cut[0] and start < cut[0]:
            kept.append((entry, (start, end), written))
        elif start >= cut[1]:
            kept.append((entry, (start - removed, end - removed), written))
        else:
            return None
    return tuple(kept)
