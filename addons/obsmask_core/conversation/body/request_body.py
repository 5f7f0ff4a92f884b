"""A request body read for masking, two ways: quick and exact.

Both give the body's top-level members, its conversation list, a way to
write new values into the body (every other byte stays the client's), and
the parser that checks the result. The rewrite tries the quick reader first
and the exact one when the quick one cannot place a value or its result
fails the check, so a body is never refused for being read quickly.

- ``QuickBody``: orjson parses the body, and the values to replace are found
  by their bytes (``value_search``). About 5x cheaper than the exact reader
  on agent bodies. It reads strict JSON only: a body with ``NaN``, a lone
  surrogate or anything else orjson refuses goes to the exact reader.
- ``ExactBody``: the json module parses the body member by member and
  records where each item is (``request_text``); its errors are the ones a
  user sees for a body that is not a request.

Both sides of a comparison are always parsed by the same reader, so their
differences (orjson reads integers past 64 bits as floats) cannot make a
body look unchanged when it changed.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring

import orjson

from obsmask_core.conversation.body.request_text import (
    PathStep,
    RequestText,
    UnsupportedBody,
    loads,
    parse_request,
)
from obsmask_core.conversation.body.value_search import byte_before, find_values
from obsmask_core.shared.json_text import Span, splice


@dataclass(frozen=True)
class Replacement:
    """``items[index][path...]``, as found (``old``), becomes ``new``."""

    index: int
    path: tuple[PathStep, ...]
    old: object
    new: object

    def encoded(self) -> str:
        # One writer for both readers: the same plan gives the same bytes.
        # A string (a placeholder) is what json.dumps(..., ensure_ascii=False)
        # makes of it, without its dispatch.
        if type(self.new) is str:
            return encode_basestring(self.new)
        return json.dumps(self.new, ensure_ascii=False)


@dataclass(frozen=True)
class MemberAdded:
    """The object ``items[index][path...]``, as found (``old``), gains the
    member ``name``: ``value``, written after its last member; every byte of
    the object stays the client's."""

    index: int
    path: tuple[PathStep, ...]
    old: object
    name: str
    value: object

    @property
    def new(self) -> object:
        assert isinstance(self.old, dict)
        return {**self.old, self.name: self.value}

    def encoded(self) -> str:
        # ASCII escapes: a copied value may hold what UTF-8 cannot write.
        return "," + json.dumps(self.name) + ":" + json.dumps(
            self.value, separators=(",", ":"), allow_nan=False)


Edit = Replacement | MemberAdded


def _placed(span: Span, edit: Edit, closing: int | str) -> tuple[Span, str] | None:
    """Where ``edit`` goes in the text whose value ``edit.old`` spans
    ``span``, ``closing`` being that value's last character (a member is
    added before an object's closing brace)."""
    if isinstance(edit, Replacement):
        return span, edit.encoded()
    if closing not in ("}", ord("}")):
        return None
    try:
        return (span[1] - 1, span[1] - 1), edit.encoded()
    except (TypeError, ValueError):
        return None  # a value JSON cannot write (NaN): the body goes unchanged


# Where a body's list closes is proven by the parse itself: a marker
# inserted just before the ``]`` comes out as the list's last element only
# if that ``]`` closes the list (the one the parse keeps, should a client
# repeat the member). Random per process: no client can send it.
_END_MARKER = "obsmask-list-end-" + secrets.token_hex(8)
_MARKED = b',"' + _END_MARKER.encode("ascii") + b'"'


def loads_marking_end(body: bytes, list_member: str, end: int | None) -> tuple[object, bool]:
    """``body`` parsed by orjson (JSONDecodeError if it cannot be), and
    whether the byte at ``end`` proved to close its list; the document is
    the body's either way (the marker taken out again)."""
    # An empty list takes no marker: ``[,`` is not JSON.
    if end is not None and 0 < end < len(body) and body[end] == ord("]") \
            and byte_before(body, end) not in (ord("["), None):
        view = memoryview(body)
        try:
            # One copy of the body, not three (it may weigh 10 MB).
            document = orjson.loads(b"".join((view[:end], _MARKED, view[end:])))
        except orjson.JSONDecodeError:
            document = None
        if isinstance(document, dict):
            items = document.get(list_member)
            if isinstance(items, list) and items and items[-1] == _END_MARKER:
                items.pop()
                return document, True
    return orjson.loads(body), False


def _last_byte_position(body: bytes, pos: int) -> int | None:
    """Where the last byte before ``pos`` that is not JSON white space is."""
    pos -= 1
    while pos >= 0 and body[pos] in b" \t\r\n":
        pos -= 1
    return pos if pos >= 0 else None


# Added items that open this many arrays and objects may nest deep enough
# for orjson (1024 levels) or Python's recursion (the rules check compares
# items recursively) to refuse the whole body: it is read whole, and meets
# the same fate as when masked anew.
_NESTING_READ_WHOLE = 500

# The next member's name may also be written inside a later value: a few
# places are tried, from the end.
_NAME_ATTEMPTS = 4


def added_items(added: bytes) -> list[object] | None:
    """The items that bytes inserted where a list closes add to it: ``,``
    and items, read as a list of their own (``[`` + items + ``]``: one
    value, so no added byte can close that list early); none for white
    space alone; None for anything else."""
    added = added.strip(b" \t\r\n")
    if not added:
        return []
    if added[:1] != b",":
        return None
    try:
        new = orjson.loads(b"[" + added[1:] + b"]")
    except orjson.JSONDecodeError:
        return None
    # A lone comma reads as no items here and is not JSON there.
    return new if isinstance(new, list) and new else None


def grown_items(body: bytes, start: int, end: int, kept: int) -> list[object] | None:
    """The items ``body[start:end]`` adds to a list of ``kept`` items that
    proved to close at ``start`` (``added_items``), when the grown body can
    be read from them alone: not after no items (``[,`` is not JSON), and
    not nested deep enough for orjson to refuse the whole body (that is
    left to the whole read)."""
    added = body[start:end]
    new = added_items(added)
    if new is None or (new and (not kept or added.count(b"[") + added.count(b"{")
                                >= _NESTING_READ_WHOLE)):
        return None
    return new


@dataclass(frozen=True)
class QuickBody:
    body: bytes
    members: dict[str, object]
    items: list[object]
    # Where the list closes (its ``]``), when the read proved it.
    list_end: int | None = None
    # Read from a kept document (``grown``): how many of the items it held.
    kept_items: int | None = None

    @classmethod
    def read(cls, body: bytes, list_member: str, end: int | None = None) -> QuickBody | None:
        """The body read by orjson, or None when orjson cannot read it or it
        is not an object with the list (the exact reader says why). With
        ``end``, where the list is thought to close: the read proves it or
        not (``list_end``), at no extra cost when it does."""
        try:
            document, proven = loads_marking_end(body, list_member, end)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(document, dict):
            return None
        items = document.get(list_member)
        if not isinstance(items, list):
            return None
        return cls(body, document, items, end if proven else None)

    @classmethod
    def grown(cls, body: bytes, list_member: str, document: dict[str, object],
              start: int, end: int) -> QuickBody | None:
        """``body`` read without parsing it all: it is a body that orjson
        read as ``document``, whose list proved to close at ``start``, with
        ``body[start:end]`` inserted there and no other byte changed. None
        unless those bytes are ``,`` and items (or only white space).

        JSON reads left to right, and a value reads the same wherever it
        stands: the reader comes to ``start`` as it came in the old body,
        inside the list after its last item; it reads the comma and the
        added items as it reads them here, and is back in the same place,
        from where the old body's bytes read as before, its ``]`` closing
        the list. So ``body`` reads as ``document`` with the items added,
        and its list closes at ``end``. The added bytes are read as a list
        of their own, ``[`` + items + ``]``: one value, whose ``]`` is then
        the last byte, so no added byte closes the old list early (a
        wrapping that reads the items at their depth in the body could be
        split in two values and is not used)."""
        items = document.get(list_member)
        if not isinstance(items, list):
            return None
        kept = len(items)
        new = grown_items(body, start, end, kept)
        if new is None:
            return None
        if new:
            items = [*items, *new]
        # A new top level (and, with items added, a new list): the kept
        # document is shared, and nothing writes into a body's items.
        members = dict(document)
        members[list_member] = items
        return cls(body, members, items, end, kept)

    def guess_list_end(self, list_member: str) -> int | None:
        """Where the list probably closes, from the order of the members:
        before the object's own ``}`` when the list comes last, else before
        the next member's name. Only a guess: a read or a check proves it
        (``loads_marking_end``)."""
        names = list(self.members)
        following = names.index(list_member) + 1 if list_member in names else 0
        body = self.body
        if following == len(names):
            close = _last_byte_position(body, len(body))
            if close is None or body[close] != ord("}"):
                return None
            end = _last_byte_position(body, close)
            return end if end is not None and body[end] == ord("]") else None
        name = orjson.dumps(names[following])
        at = len(body)
        for _ in range(_NAME_ATTEMPTS):
            at = body.rfind(name, 0, at)
            if at < 0:
                return None
            comma = _last_byte_position(body, at)
            end = _last_byte_position(body, comma) if comma is not None \
                and body[comma] == ord(",") else None
            if end is not None and body[end] == ord("]"):
                return end
        return None

    def replaced(self, replacements: Sequence[Edit]) -> bytes | None:
        """The body with the values replaced, or None if one is not found."""
        return self.replace_in(self.body, replacements)

    @staticmethod
    def replace_in(body: bytes, replacements: Sequence[Edit]) -> bytes | None:
        """``body`` with the values replaced, found by their bytes."""
        ordered = sorted(replacements, key=lambda r: (r.index, r.path))
        spans = find_values(body, [(r.old, isinstance(r.path[-1], int)) for r in ordered])
        if spans is None:
            return None
        edits: list[tuple[Span, bytes]] = []
        for span, replacement in zip(spans, ordered, strict=True):
            placed = _placed(span, replacement, body[span[1] - 1])
            if placed is None:
                return None
            edits.append((placed[0], placed[1].encode("utf-8")))
        return splice(body, edits)

    @staticmethod
    def parse_again(body: bytes, list_member: str, end: int | None = None) -> tuple[object, bool]:
        """The masked body parsed, and whether its list proved to close at
        ``end``."""
        return loads_marking_end(body, list_member, end)


@dataclass(frozen=True)
class ExactBody:
    request: RequestText

    @classmethod
    def read(cls, body: bytes, list_member: str) -> ExactBody:
        """Raise UnsupportedBody (with a reason for the log) for a body that
        is not a JSON object with the list."""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UnsupportedBody(f"body is not valid UTF-8 (byte {e.start})") from None
        return cls(parse_request(text, list_member))

    @property
    def members(self) -> dict[str, object]:
        return self.request.members

    @property
    def items(self) -> list[object]:
        return self.request.items

    def replaced(self, replacements: Sequence[Edit]) -> bytes | None:
        edits: list[tuple[Span, str]] = []
        for replacement in replacements:
            span = self.request.span_at(replacement.index, replacement.path)
            placed = _placed(span, replacement, self.request.text[span[1] - 1]) \
                if span is not None else None
            if placed is None:
                return None
            edits.append(placed)
        return splice(self.request.text, edits).encode("utf-8")

    @staticmethod
    def parse_again(body: bytes, list_member: str, end: int | None = None) -> tuple[object, bool]:
        return loads(body.decode("utf-8")), False


RequestBody = QuickBody | ExactBody
