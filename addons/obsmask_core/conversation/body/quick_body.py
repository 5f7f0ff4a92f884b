"""The quick reader of a request body (``request_body`` tells the two
apart): orjson parses the body, and the values to replace are found by
their bytes (``value_search``). It reads strict JSON only; a body orjson
refuses goes to the exact reader. It can also read a body that grew from
one it read before from the added bytes alone (``QuickBody.grown``)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from obsmask_core.conversation.body.request_body import Edit, Replacement, edits_made
from obsmask_core.conversation.body.value_search import byte_before, find_values
from obsmask_core.shared.json_text import Span

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
        found = QuickBody.replace_found(body, replacements)
        return found[0] if found is not None else None

    @staticmethod
    def replace_found(body: bytes, replacements: Sequence[Edit],
                      ) -> tuple[bytes, list[tuple[Edit, Span]]] | None:
        """``body`` with the values replaced, found by their bytes, and the
        span where each edit's value was found; None if one is not found."""
        ordered = sorted(replacements, key=lambda r: (r.index, r.path))
        spans = find_values(body, [(r.old, r.path[-1],
                                    r.anchor if isinstance(r, Replacement) else None)
                                   for r in ordered])
        if spans is None:
            return None
        found = list(zip(ordered, spans, strict=True))
        new_body = edits_made(body, found)
        return (new_body, found) if new_body is not None else None

    @staticmethod
    def parse_again(body: bytes, list_member: str, end: int | None = None) -> tuple[object, bool]:
        """The masked body parsed, and whether its list proved to close at
        ``end``."""
        return loads_marking_end(body, list_member, end)
