"""Small pieces for working on JSON as text: skipping white space, and
replacing spans of a text (so every byte outside them stays as it was)."""

from __future__ import annotations

import re
from typing import AnyStr

Span = tuple[int, int]

_WHITESPACE = re.compile(r"[ \t\n\r]*")


def skip_whitespace(text: str, pos: int) -> int:
    """The position of the first character at or after ``pos`` that is not
    JSON white space."""
    match = _WHITESPACE.match(text, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def splice(text: AnyStr, replacements: list[tuple[Span, AnyStr]]) -> AnyStr:
    """``text`` (a str, or the bytes of a body) with each span replaced;
    spans must not overlap."""
    pieces: list[AnyStr] = []
    pos = 0
    for (start, end), new in sorted(replacements):
        if start < pos:
            raise ValueError("overlapping spans")
        pieces.append(text[pos:start])
        pieces.append(new)
        pos = end
    pieces.append(text[pos:])
    return text[:0].join(pieces)
