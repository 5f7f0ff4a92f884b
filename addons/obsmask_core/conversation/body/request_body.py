"""A request body read for masking, two ways: quick and exact.

Both give the body's top-level members, its conversation list, a way to
write new values into the body (every other byte stays the client's), and
the parser that checks the result. The rewrite tries the quick reader first
and the exact one when the quick one cannot place a value or its result
fails the check, so a body is never refused for being read quickly.

- ``QuickBody`` (``quick_body``): orjson parses the body, and the values to
  replace are found by their bytes (``value_search``). Much cheaper than
  the exact reader on agent bodies. It reads strict JSON only: a body with
  ``NaN``, a lone surrogate or anything else orjson refuses goes to the
  exact reader.
- ``ExactBody`` (here): the json module parses the body member by member
  and records where each item is (``request_text``); its errors are the
  ones a user sees for a body that is not a request.

Both sides of a comparison are always parsed by the same reader, so their
differences (orjson reads integers past 64 bits as floats) cannot make a
body look unchanged when it changed. Both write the same edits
(``Replacement``, ``MemberAdded``), placed in the text by ``placed_edit``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring

from obsmask_core.conversation.body.request_text import (
    PathStep,
    RequestText,
    UnsupportedBody,
    loads,
    parse_request,
)
from obsmask_core.shared.json_text import Span, splice


@dataclass(frozen=True)
class Replacement:
    """``items[index][path...]``, as found (``old``), becomes ``new``."""

    index: int
    path: tuple[PathStep, ...]
    old: object
    new: object
    # A string written in the body after every earlier copy of ``old`` and
    # before this one (a tool result's call id: its call comes after every
    # earlier turn's results), where the quick reader's search begins.
    anchor: str | None = None

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


def placed_edit(span: Span, edit: Edit, closing: int | str) -> tuple[Span, str] | None:
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


def edits_placed(body: bytes, found: Sequence[tuple[Edit, Span]]
                 ) -> list[tuple[Span, bytes]] | None:
    """Where each edit goes in ``body``, its value spanning there, and the
    bytes written there (``placed_edit``), in the order of ``found``; None
    if one cannot be placed there."""
    placed: list[tuple[Span, bytes]] = []
    for edit, span in found:
        made = placed_edit(span, edit, body[span[1] - 1])
        if made is None:
            return None
        placed.append((made[0], made[1].encode("utf-8")))
    return placed


def edits_made(body: bytes, found: Sequence[tuple[Edit, Span]]) -> bytes | None:
    """``body`` with each edit made where its value spans (``placed_edit``);
    None if one cannot be placed there, or two overlap."""
    placed = edits_placed(body, found)
    return spliced(body, placed) if placed is not None else None


def spliced(body: bytes, placed: list[tuple[Span, bytes]]) -> bytes | None:
    """``body`` with the ``placed`` bytes written over their spans; None if
    two overlap."""
    try:
        return splice(body, placed)
    except ValueError:
        return None  # two edits in one place


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
            placed = placed_edit(span, replacement, self.request.text[span[1] - 1]) \
                if span is not None else None
            if placed is None:
                return None
            edits.append(placed)
        return splice(self.request.text, edits).encode("utf-8")

    @staticmethod
    def parse_again(body: bytes, list_member: str, end: int | None = None) -> tuple[object, bool]:
        return loads(body.decode("utf-8")), False
