"""A body grown from a kept request, read without parsing it whole.

An agent's next request is its previous one with a few items added where
the list closes. When the previous request's read proved where its list
closes, and ``previous_requests`` found the body to be those bytes with
others inserted there, only the inserted bytes need reading: if they are
``,`` and whole items, the body reads as the previous request's items with
these added, nothing else changed (``QuickBody.grown`` says why). With its
index resumed from the previous request's and its name known, masking
plans such a body from the added items alone, and mostly sends it as the
previous masked body with the same bytes inserted: the body is then never
parsed whole. When something does ask for its older items or its other
members (a new replacement to check, a rule that measures every item),
orjson reads the whole body then.

That saves orjson's read of the whole body on every request of a
conversation: with many conversations going on, no parsed body is kept
from one request to the next (``previous_requests``: the garbage
collector would walk them all), so without this each request was read
whole. With few going on, documents are kept: a conversation's third
request in a row is read whole once more for its document to be kept, and
its later requests are read from the document (``PreviousRequests.keep``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias, overload

import orjson

from obsmask_core.conversation.body.quick_body import QuickBody, grown_items
from obsmask_core.conversation.body.request_body import Edit

# A slice of a list (typeshed's bare ``slice`` has Any type arguments).
Slice: TypeAlias = "slice[int | None, int | None, int | None]"


class GrownItems(Sequence[object]):
    """A grown body's list: the ``kept`` items of the request it grew from,
    read only when one of them is asked for, then the ``added`` items."""

    def __init__(self, body: bytes, list_member: str, kept: int,
                 added: list[object]) -> None:
        self._body = body
        self._list_member = list_member
        self._kept = kept
        self._added = added
        self._document: dict[str, object] | None = None

    def __len__(self) -> int:
        return self._kept + len(self._added)

    @overload
    def __getitem__(self, at: int) -> object: ...

    @overload
    def __getitem__(self, at: Slice) -> list[object]: ...

    def __getitem__(self, at: int | Slice) -> object | list[object]:
        if isinstance(at, slice):
            start, stop, step = at.indices(len(self))
            if step == 1 and start >= self._kept:
                return self._added[start - self._kept:max(start, stop) - self._kept]
            return self.whole()[at]
        position = at + len(self) if at < 0 else at
        if self._kept <= position < len(self):
            return self._added[position - self._kept]
        return self.whole()[at]

    def __iter__(self) -> Iterator[object]:
        return iter(self.whole())

    @property
    def document(self) -> dict[str, object] | None:
        """The body as orjson read it, if it was read whole."""
        return self._document

    def read_document(self) -> dict[str, object]:
        """The body read whole by orjson (once). ValueError if it does not
        read as the kept items with the added ones (it always does when
        ``grown_from`` and the proven end hold: this only keeps a broken
        assumption from going unnoticed)."""
        if self._document is None:
            document = orjson.loads(self._body)
            items = document.get(self._list_member) if isinstance(document, dict) else None
            if not isinstance(items, list) or len(items) != len(self) \
                    or items[self._kept:] != self._added:
                raise ValueError("a grown body did not read as its kept items and added ones")
            self._document = document
        return self._document

    def whole(self) -> list[object]:
        items = self.read_document()[self._list_member]
        assert isinstance(items, list)
        return items


@dataclass(frozen=True)
class GrownBody:
    """A body that is a kept request's, whose list proved to close at
    ``list_end - len(added bytes)``, with ``,`` and items inserted there:
    its items and members are read as they are asked for."""

    body: bytes
    items: GrownItems = field(repr=False)
    list_end: int
    # How many of the items the kept request held.
    kept_items: int

    @classmethod
    def read(cls, body: bytes, list_member: str, kept: int, start: int,
             end: int) -> GrownBody | None:
        """``body`` grown from a kept request of ``kept`` items whose list
        proved to close at ``start``, by ``body[start:end]``; None unless
        those bytes are ``,`` and items (or white space), not nested so
        deep that the whole body must be read to tell."""
        new = grown_items(body, start, end, kept)
        if new is None:
            return None
        return cls(body, GrownItems(body, list_member, kept, new), end, kept)

    @property
    def members(self) -> dict[str, object]:
        """The top-level members (the body is read whole for them)."""
        return self.items.read_document()

    @property
    def document(self) -> dict[str, object] | None:
        """The body as orjson read it, if something asked for it."""
        return self.items.document

    def replaced(self, replacements: Sequence[Edit]) -> bytes | None:
        return QuickBody.replace_in(self.body, replacements)

    @staticmethod
    def parse_again(body: bytes, list_member: str, end: int | None = None) -> tuple[object, bool]:
        return QuickBody.parse_again(body, list_member, end)
