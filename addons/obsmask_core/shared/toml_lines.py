"""Where each table and key of a TOML text is written, by line.

tomli gives the document without positions, and an error about the settings
file is only useful with the line to look at. The text has already been
parsed, so it is valid TOML: this reads only what places a name, table
headers (``[a.b]``, ``[a . "b"]``, ``[[a.b]]``) and keys (``a.b = 1``), and
skips over values (strings of every kind, arrays and inline tables over
several lines) so that nothing inside them is taken for a name.

A name inside an inline table, or under an array of tables, is placed at
the key or header that holds it (``line_of`` takes the longest known
prefix): the same line for an inline table, which TOML keeps on one line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

import tomli

Names = tuple[str, ...]
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_BLANK = " \t"


def toml_lines(text: str) -> Mapping[Names, int]:
    """Every table and key path of ``text`` with the line (from 1) that
    first names it; a table named only as part of a longer header or dotted
    key (``a`` in ``[a.b]``) has that line."""
    lines: dict[Names, int] = {}
    table: Names = ()
    at = 0
    while at < len(text):
        at = _skip(text, at, _BLANK + "\r\n")
        if at >= len(text):
            break
        line = text.count("\n", 0, at) + 1
        if text[at] == "#":
            at = _line_end(text, at)
            continue
        if text[at] == "[":
            double = text.startswith("[[", at)
            names, at = _dotted_key(text, at + (2 if double else 1))
            table = names
            _place(lines, names, line)
            at = _line_end(text, at)
            continue
        names, at = _dotted_key(text, at)
        _place(lines, table + names, line)
        at = _value_end(text, _skip(text, at, _BLANK) + 1)  # past the "="
    return MappingProxyType(lines)


def line_of(lines: Mapping[Names, int], names: Names) -> int | None:
    """The line of ``names``, or of its longest prefix that has one."""
    for end in range(len(names), 0, -1):
        if names[:end] in lines:
            return lines[names[:end]]
    return None


def _place(lines: dict[Names, int], names: Names, line: int) -> None:
    for end in range(1, len(names) + 1):
        lines.setdefault(names[:end], line)


def _skip(text: str, at: int, blanks: str) -> int:
    while at < len(text) and text[at] in blanks:
        at += 1
    return at


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end + 1


def _dotted_key(text: str, at: int) -> tuple[Names, int]:
    """The parts of the (dotted) key at ``at`` and where it ends."""
    parts: list[str] = []
    while True:
        at = _skip(text, at, _BLANK)
        if text.startswith(('"', "'"), at):
            end = _string_end(text, at)
            parts.append(_string_value(text[at:end]))
            at = end
        else:
            found = _BARE_KEY.match(text, at)
            if found is None:  # not reached on valid TOML
                return tuple(parts), at
            parts.append(found.group())
            at = found.end()
        at = _skip(text, at, _BLANK)
        if not text.startswith(".", at):
            return tuple(parts), at
        at += 1


def _string_value(quoted: str) -> str:
    """A quoted key's text, its escapes read as TOML reads them."""
    value = tomli.loads(f"k = {quoted}")["k"]
    assert isinstance(value, str)
    return value


def _string_end(text: str, at: int) -> int:
    """Just past the string (of any of TOML's four kinds) that starts at
    ``at``; a backslash escapes the next character in basic strings only."""
    quote = text[at]
    escapes = quote == '"'
    closing = quote * 3 if text.startswith(quote * 3, at) else quote
    at += len(closing)
    while at < len(text):
        if escapes and text[at] == "\\":
            at += 2
        elif text.startswith(closing, at):
            end = at + len(closing)
            # A multi-line string may end its own text with one or two
            # quotes, just before the closing three.
            while len(closing) == 3 and end < len(text) and text[end] == quote \
                    and end - at < 5:
                end += 1
            return end
        else:
            at += 1
    return at


def _value_end(text: str, at: int) -> int:
    """The start of the line after the value that starts at ``at``: its
    arrays and inline tables closed, its strings ended."""
    depth = 0
    while at < len(text):
        char = text[at]
        if char in "\"'":
            at = _string_end(text, at)
            continue
        if char == "#":
            end = text.find("\n", at)
            at = len(text) if end < 0 else end
            continue
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "\n" and depth <= 0:
            return at + 1
        at += 1
    return at
