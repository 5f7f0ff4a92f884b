"""A grown request's masked body made from the kept request's when the plan
changed there: only the edits that changed are made again.

When the frontier moves, a plan masks one more turn's results and moves the
frontier breakpoint; every earlier edit stays. Made from scratch, the
masked body splices every edit of the history again (``constructed``);
here the kept request's masked body is taken up to the first place that
changed, and only the body from there on is spliced.

Why that body is the one ``constructed`` gives, byte for byte: the grown
body begins with the kept body's bytes up to where its list closes (``P``
below is never past that), and each kept edit was written over a span a
parse proved in those bytes. The kept masked body is the kept body with
its edits spliced in, in the order of their spans; up to a place ``P``
before which no edit was added or taken away (and none runs across it),
it is the grown body's first ``P`` bytes with the same edits, shifted by
what they wrote beyond what they replaced. From ``P`` on, the grown body
with the edits from ``P`` on, shifted back by ``P``, is what a splice of
the whole gives there. tests/unit/test_masked_again.py holds it against
``constructed``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from obsmask_core.conversation.body.request_body import Edit, spliced
from obsmask_core.conversation.reuse.proven_spans import ProvenSpans, placed_at_proven
from obsmask_core.conversation.reuse.records import (
    PlacedEdit,
    PreviousRequest,
    Signature,
    SignatureEntry,
)
from obsmask_core.shared.json_text import Span

# The edits of the entries at these positions of the plan's signature, in
# that order (the ones a kept masked body does not hold).
EditsAt = Callable[[Sequence[int]], list[Edit]]


class MaskedAgain:
    """A masked body made again, its list's end, and its placed edits."""

    __slots__ = ("body", "end", "placed")

    def __init__(self, body: bytes, end: int, placed: tuple[PlacedEdit, ...]) -> None:
        self.body, self.end, self.placed = body, end, placed


def masked_again(previous: PreviousRequest, body: bytes, start: int, signature: Signature,
                 edits_at: EditsAt, proven: ProvenSpans, end: int) -> MaskedAgain | None:
    """``body`` (the kept request ``previous`` with items added from
    ``start``, its list closing at ``end``) with the edits of ``signature``,
    made from the kept masked body; None when that body or its edits'
    places are not known, an edit's span is not proven, or an edit runs
    across the first place that changed."""
    kept, masked = previous.placed, previous.masked
    if kept is None or masked is None or start > previous.end:
        return None
    # The kept placed edits are those of the kept signature (the sets are
    # made in C; the few entries that changed are then looked for from the
    # end, where a moving frontier changes them).
    wanted, kept_entries = set(signature), set(previous.signature)
    positions = _positions(signature, wanted - kept_entries)
    made = _placed(body, [signature[at] for at in positions], edits_at(positions),
                   proven, end)
    if made is None:
        return None
    gone = kept_entries - wanted
    # The first place that changed: an edit added or taken away, or the
    # added items.
    first = min([start, *(span[0] for _, span, _ in made),
                 *(span[0] for _, span, _ in _found(kept, gone))])
    # The kept edits before it stay as written; none may run across it.
    before = len(kept)
    while before and kept[before - 1][1][0] >= first:
        before -= 1
    if before and kept[before - 1][1][1] > first:
        return None
    after = [placed for placed in kept[before:] if placed[0] not in gone]
    grew_before = len(masked) - len(previous.body) - sum(
        len(written) - (span[1] - span[0]) for _, span, written in kept[before:])
    tail = sorted(after + made, key=_by_span)
    spliced_tail = spliced(body[first:], [((span[0] - first, span[1] - first), written)
                                          for _, span, written in tail])
    if spliced_tail is None:
        return None
    new_body = b"".join((memoryview(masked)[:first + grew_before], spliced_tail))
    return MaskedAgain(new_body, end + len(new_body) - len(body), (*kept[:before], *tail))


def _positions(signature: Signature, entries: set[SignatureEntry]) -> list[int]:
    """Where ``entries`` are in ``signature``, in its order."""
    found: list[int] = []
    for at in range(len(signature) - 1, -1, -1):
        if len(found) == len(entries):
            break
        if signature[at] in entries:
            found.append(at)
    return found[::-1]


def _found(placed: tuple[PlacedEdit, ...], entries: set[SignatureEntry]) -> list[PlacedEdit]:
    """The placed edits of ``entries``, looked for from the end."""
    found: list[PlacedEdit] = []
    for edit in reversed(placed):
        if len(found) == len(entries):
            break
        if edit[0] in entries:
            found.append(edit)
    return found


def placed_in_order(signature: Signature, placed: list[tuple[Span, bytes]]
                    ) -> tuple[PlacedEdit, ...]:
    """The placed edits of a plan's ``signature`` (``placed`` in its
    order), in the order of their spans."""
    return tuple(sorted(((entry, span, written) for entry, (span, written)
                         in zip(signature, placed, strict=True)), key=_by_span))


def _placed(body: bytes, entries: list[SignatureEntry], edits: list[Edit],
            proven: ProvenSpans, end: int) -> list[PlacedEdit] | None:
    placed = placed_at_proven(body, edits, proven, end)
    if placed is None or len(placed) != len(entries):
        return None
    return [(entry, span, written)
            for entry, (span, written) in zip(entries, placed, strict=True)]


def _by_span(placed: PlacedEdit) -> tuple[Span, bytes]:
    # splice's own order: by span, then by what is written.
    return placed[1], placed[2]
