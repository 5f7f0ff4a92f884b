"""Values whose place in the body a parse proved, so that masking one later
is a splice, with nothing to search for and nothing to parse again.

The value search (``body.value_search``) finds a value by its bytes: only a
candidate, so a masked body is parsed again and checked (``masking.verify``),
and on an agent's body that check costs about as much as everything else
the request needs. A span is *proven* when a parse showed it to be exactly
the text of the value at its place:

- a masked body that passes the check proves the spans of the values it
  replaced (it read back as the plan, each value at its place);
- a body grown from a kept request adds items read by themselves
  (``added_items``): the values masking may replace there later (each tool
  result's, and the last member of the closing block of each item that
  closes a tool turn's calls, before which the frontier breakpoint goes)
  are found by their bytes, each replaced by
  a sentinel string of its own, and the added bytes read again: the spans
  are proven when every sentinel reads exactly at its value's place and
  everything else reads as before;
- a body grown from a kept request begins with that request's bytes up to
  where its list closes, so the spans proven there hold in it.

Replacing a proven span by the text of any JSON value changes exactly that
value (JSON reads left to right; one whole value's text gives way to
another's), and a member written before the ``}`` that follows an object's
proven last member is exactly one member more. A plan whose every edit has
a proven span therefore gets its masked body by splicing (``constructed``),
the check it would pass proven by construction. A plan with an edit not
proven goes the way it always did (search, splice, check), and the full
check stays the test oracle (tests/unit/test_proven_spans.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, TypeVar

import orjson

from obsmask_core.conversation.billing.breakpoints import CACHE_CONTROL, closing_block
from obsmask_core.conversation.body.quick_body import added_items
from obsmask_core.conversation.body.request_body import (
    Edit,
    MemberAdded,
    edits_placed,
    spliced,
)
from obsmask_core.conversation.body.request_text import PathStep
from obsmask_core.conversation.body.value_search import find_values
from obsmask_core.conversation.turns.turn_model import ToolTurnIndex
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, WireFormat, set_at, value_at
from obsmask_core.shared.json_text import Span, splice

# A value's place: its item, and the path to it there.
Place = tuple[int, tuple[PathStep, ...]]
ProvenSpans = Mapping[Place, Span]
# A value the probe looks for: its place, the value, and its anchor (the
# result's call id, written before it).
Candidate = tuple[Place, object, str | None]

_WHITESPACE = b" \t\r\n"
T = TypeVar("T")


def candidates(added: Sequence[object], first: int, index: ToolTurnIndex,
               fmt: WireFormat) -> list[Candidate]:
    """What masking may replace in the ``added`` items (numbered from
    ``first``), in the order the bytes hold them: each tool result's value,
    and (Anthropic) the last member of the closing block, without a
    breakpoint, of each item that closes a tool turn's calls (where the
    frontier breakpoint goes)."""
    found: dict[Place, Candidate] = {}
    order: dict[Place, tuple[int, int, int]] = {}
    # The index lists results, and turns, in the order of their items: the
    # added items' come last, so the older ones are not walked.
    for result in _from_item(index.results, first, lambda result: result.location[0]):
        item = result.location[0]
        path = fmt.value_path(result.location)
        try:
            value = value_at([added[item - first]], 0, path)
        except (TypeError, KeyError, IndexError):
            continue
        place = (item, path)
        found[place] = (place, value, result.call_id)
        order[place] = (item, result.location[1] if len(result.location) > 1 else 0, 0)
    if fmt is ANTHROPIC:
        for item in sorted({turn.last for turn in
                            _from_item(index.turns, first, lambda turn: turn.last)}):
            if item < first + len(added):
                closing = _closing_member(added[item - first], item)
                if closing is not None and closing[0] not in found:
                    found[closing[0]] = (closing[0], closing[1], None)
                    order[closing[0]] = (item, closing[2], 1)
    return [found[place] for place in sorted(found, key=order.__getitem__)]


def _from_item(listed: Sequence[T], first: int, item_of: Callable[[T], int]) -> list[T]:
    """The entries of ``listed`` (in the order of their items) from the
    first whose item is ``first`` or later."""
    at = len(listed)
    while at and item_of(listed[at - 1]) >= first:
        at -= 1
    return list(listed[at:])


def _closing_member(item: object, index: int) -> tuple[Place, object, int] | None:
    """The last member of ``item``'s closing block, its value and the block's
    number, when the block has no breakpoint (one could be added there)."""
    block_number = closing_block(item)
    if block_number is None:
        return None
    assert isinstance(item, dict)
    block = item["content"][block_number]
    if not isinstance(block, dict) or not block or CACHE_CONTROL in block:
        return None
    last = next(reversed(block))
    return (index, ("content", block_number, last)), block[last], block_number


def prove_added(body: bytes, start: int, end: int, added: Sequence[object], first: int,
                wanted: Sequence[Candidate]) -> dict[Place, Span]:
    """The spans, in ``body``, of the ``wanted`` values of the items that
    ``body[start:end]`` adds (``added``, numbered from ``first``), proven by
    one more read of those bytes with each value replaced by a sentinel;
    none when that read differs anywhere from what it should be."""
    if not wanted:
        return {}
    region = body[start:end]
    spans = find_values(region, [(value, place[1][-1], anchor)
                                 for place, value, anchor in wanted])
    if spans is None:
        return {}
    probe = [(span, orjson.dumps(sentinel(number)))
             for number, span in enumerate(spans)]
    try:
        read = added_items(splice(region, probe))
    except ValueError:
        return {}
    expected = list(added)
    for number, (place, _, _) in enumerate(wanted):
        set_at(expected, place[0] - first, place[1], sentinel(number))
    if read != expected:
        return {}
    return {place: (start + span[0], start + span[1])
            for (place, _, _), span in zip(wanted, spans, strict=True)}


def sentinel(number: int) -> str:
    """A string no value is expected to be, written where value ``number``
    was to find out where it is read."""
    return f"\x00obsmask-proof-{number}"


def unproven(wanted: Sequence[Candidate], edits: Sequence[Edit],
             proven: ProvenSpans) -> list[Candidate]:
    """The ``wanted`` values a check of ``edits`` can prove: not proven yet,
    not inside an edited value or holding one, and not in the item that
    gains a member (its check allows that member alone)."""
    gaining = {edit.index for edit in edits if isinstance(edit, MemberAdded)}
    edited: dict[int, list[tuple[PathStep, ...]]] = {}
    for edit in edits:
        edited.setdefault(edit.index, []).append(edit.path)
    kept = []
    for candidate in wanted:
        (index, path), _, _ = candidate
        if (index, path) in proven or index in gaining or any(
                path[:len(other)] == other or other[:len(path)] == path
                for other in edited.get(index, ())):
            continue
        kept.append(candidate)
    return kept


def proven_by_check(found: Sequence[tuple[Edit, Span]]) -> dict[Place, Span]:
    """The spans where a masked body's edits were made, once its check
    passed: each held exactly its value's text (for an added member, its
    object's). Not two edits of one value with one text: swapped, they
    would read back alike, so the check does not tell which is where."""
    by_text: dict[str, list[int]] = {}
    for number, (edit, _) in enumerate(found):
        by_text.setdefault(edit.encoded(), []).append(number)
    twins = {number for numbers in by_text.values() for number in numbers
             if any(other != number and found[other][0].old == found[number][0].old
                    for other in numbers)}
    return {(edit.index, edit.path): span
            for number, (edit, span) in enumerate(found) if number not in twins}


class Constructed(NamedTuple):
    """A body with edits made at their proven spans: how many bytes longer
    it got, and where each edit went and what it wrote (``placed``, in the
    order of the edits)."""

    body: bytes
    grew: int
    placed: list[tuple[Span, bytes]]


def constructed(body: bytes, edits: Sequence[Edit], proven: ProvenSpans,
                end: int) -> Constructed | None:
    """``body`` with ``edits`` made at their proven spans; None unless every
    edit's span is proven and before ``end`` (where the list closes)."""
    placed = placed_at_proven(body, edits, proven, end)
    # None (two edits in one place): the search and the check decide.
    new_body = spliced(body, placed) if placed is not None else None
    if new_body is None or placed is None:
        return None
    return Constructed(new_body, len(new_body) - len(body), placed)


def placed_at_proven(body: bytes, edits: Sequence[Edit], proven: ProvenSpans,
                     end: int) -> list[tuple[Span, bytes]] | None:
    """Where each of ``edits`` goes in ``body`` and what it writes there
    (``edits_placed``), in their order; None unless every edit's span is
    proven and before ``end`` (where the list closes)."""
    found: list[tuple[Edit, Span]] = []
    for edit in edits:
        span = _edit_span(body, edit, proven)
        if span is None or span[1] > end:
            return None
        found.append((edit, span))
    return edits_placed(body, found)


def _edit_span(body: bytes, edit: Edit, proven: ProvenSpans) -> Span | None:
    """The span an edit is placed by: its value's, or for an added member
    its object's, or else up to the ``}`` after the object's last member."""
    span = proven.get((edit.index, edit.path))
    if span is not None or not isinstance(edit, MemberAdded):
        return span
    if not isinstance(edit.old, dict) or not edit.old:
        return None
    last = proven.get((edit.index, (*edit.path, next(reversed(edit.old)))))
    if last is None:
        return None
    close = last[1]
    while close < len(body) and body[close] in _WHITESPACE:
        close += 1
    if close >= len(body) or body[close] != ord("}"):
        return None
    return last[0], close + 1


def shifted(proven: ProvenSpans, cut: Span) -> ProvenSpans:
    """The proven spans once the bytes of ``cut`` are taken out of the body:
    the ones before it as they are, the ones after it moved back; one that
    holds any of those bytes is no longer proven."""
    if not proven or max(proven.values(), key=_span_end)[1] <= cut[0]:
        return proven  # all before it (a moved breakpoint is cut at the list's end)
    removed = cut[1] - cut[0]
    kept: dict[Place, Span] = {}
    for place, (start, end) in proven.items():
        if end <= cut[0]:
            kept[place] = (start, end)
        elif start >= cut[1]:
            kept[place] = (start - removed, end - removed)
    return kept


def _span_end(span: Span) -> int:
    return span[1]
