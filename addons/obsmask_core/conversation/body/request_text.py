"""Parse a JSON request body and remember where chosen values sit in the text.

Masking replaces a few string values and must leave every other byte as the
client sent it: a prompt cache keys on the exact prefix, and a re-serialised
body (other spacing, other escapes) would miss it even where nothing was
masked. So the body is parsed once, recording the character span of each
message's ``content``, and the new body is the old text with those spans
replaced.

The outer levels (the request object, the ``messages`` array, each message
object) are walked here with a loop; every value inside them is parsed by the
C scanner of the ``json`` module. A value nested deeper than the interpreter's
recursion limit raises ``UnsupportedBody`` instead of crashing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from obsmask_core.shared.json_text import Span, skip_whitespace


@dataclass(frozen=True)
class NonFiniteNumber:
    """``NaN``/``Infinity`` as parsed here: equal to itself, unlike float('nan'),
    so comparing a body before and after masking is exact."""

    name: str


class UnsupportedBody(ValueError):
    """The body is not something obsmask can rewrite; the message says why."""


def _number(text: str) -> float | NonFiniteNumber:
    """A JSON number with a fraction or exponent. One too big for a float
    (``1e400``) stays as written, like NaN and Infinity: as ``inf`` it would
    be written back as orjson writes infinity, ``null``, and a request
    holding it would look the same as one holding null."""
    value = float(text)
    return value if math.isfinite(value) else NonFiniteNumber(text)


_decoder = json.JSONDecoder(parse_constant=NonFiniteNumber, parse_float=_number)


def loads(text: str) -> object:
    """``json.loads`` with the same constants as the span parser."""
    return _decoder.decode(text)


def _value(text: str, pos: int) -> tuple[object, int]:
    try:
        return _decoder.raw_decode(text, pos)
    except json.JSONDecodeError as e:
        # json's messages may end in "at" ("Unterminated string starting at").
        raise UnsupportedBody(f"not valid JSON ({e.msg.removesuffix(' at')} at character "
                              f"{e.pos})") from None
    except RecursionError:
        raise UnsupportedBody("JSON nested too deeply to parse safely") from None


def _expect(text: str, pos: int, char: str, what: str) -> int:
    if pos >= len(text) or text[pos] != char:
        # The body is never quoted in a message: it may carry secrets.
        raise UnsupportedBody(f"not valid JSON (expected {what} at character {pos})")
    return pos + 1


MemberParser = Callable[[str, str, int], tuple[object, int]]


def _plain_member(_key: str, text: str, pos: int) -> tuple[object, int]:
    return _value(text, pos)


@dataclass
class ObjectScan:
    values: dict[str, object] = field(default_factory=dict)
    spans: dict[str, Span] = field(default_factory=dict)
    end: int = 0


def scan_object(text: str, pos: int, member: MemberParser = _plain_member) -> ObjectScan:
    """Parse the object starting at ``text[pos]`` (``{``), member by member.

    As in ``json.loads``, the last of duplicate keys wins (values and spans).
    """
    scan = ObjectScan()
    pos = skip_whitespace(text, _expect(text, pos, "{", "'{'"))
    if pos < len(text) and text[pos] == "}":
        scan.end = pos + 1
        return scan
    while True:
        _expect(text, pos, '"', "a member name")  # raises unless a string starts here
        key, pos = _value(text, pos)
        assert isinstance(key, str)  # a JSON value that starts with '"' is a string
        pos = skip_whitespace(text, _expect(text, skip_whitespace(text, pos), ":", "':'"))
        value, end = member(key, text, pos)
        scan.values[key] = value
        scan.spans[key] = (pos, end)
        pos = skip_whitespace(text, end)
        if pos < len(text) and text[pos] == ",":
            pos = skip_whitespace(text, pos + 1)
            continue
        scan.end = _expect(text, pos, "}", "',' or '}'")
        return scan


@dataclass
class ArrayScan:
    values: list[object] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    end: int = 0


def scan_array(text: str, pos: int) -> ArrayScan:
    """Parse the array starting at ``text[pos]`` (``[``), element by element."""
    scan = ArrayScan()
    pos = skip_whitespace(text, _expect(text, pos, "[", "'['"))
    if text.startswith("]", pos):
        scan.end = pos + 1
        return scan
    while True:
        value, end = _value(text, pos)
        scan.values.append(value)
        scan.spans.append((pos, end))
        pos = skip_whitespace(text, end)
        if text.startswith(",", pos):
            pos = skip_whitespace(text, pos + 1)
            continue
        scan.end = _expect(text, pos, "]", "',' or ']'")
        return scan


PathStep = str | int


@dataclass
class RequestText:
    """A request body parsed for masking: its members, the items of its
    conversation list (``messages`` or ``input``), and where each item is."""

    text: str
    members: dict[str, object]
    items: list[object]
    item_spans: list[Span]

    def span_at(self, index: int, path: tuple[PathStep, ...]) -> Span | None:
        """Span of ``items[index][path[0]][path[1]]...``, or None if absent.

        Found on demand: only the few items that get masked are walked member
        by member; the others were parsed in one call each.
        """
        span = self.item_spans[index]
        for step in path:
            start = span[0]
            if isinstance(step, str):
                if not self.text.startswith("{", start):
                    return None
                found = scan_object(self.text, start).spans.get(step)
            else:
                if not self.text.startswith("[", start):
                    return None
                spans = scan_array(self.text, start).spans
                found = spans[step] if 0 <= step < len(spans) else None
            if found is None:
                return None
            span = found
        return span


def parse_request(text: str, list_member: str) -> RequestText:
    """Parse a request body whose conversation is the array ``list_member``;
    raise UnsupportedBody if the body is not such an object."""
    conversation = ArrayScan()
    found_list = False

    def member(key: str, text: str, pos: int) -> tuple[object, int]:
        nonlocal conversation, found_list
        if key != list_member:
            return _value(text, pos)
        found_list = text.startswith("[", pos)
        if not found_list:
            return _value(text, pos)
        conversation = scan_array(text, pos)
        return conversation.values, conversation.end

    start = skip_whitespace(text, 0)
    if start >= len(text):
        raise UnsupportedBody("the body is empty")
    if not text.startswith("{", start):
        value_end = skip_whitespace(text, _value(text, start)[1])  # raises if not JSON at all
        if value_end != len(text):
            raise UnsupportedBody(f"not valid JSON (extra data at character {value_end})")
        raise UnsupportedBody("the JSON is not an object")
    scan = scan_object(text, start, member)
    trailing = skip_whitespace(text, scan.end)
    if trailing != len(text):
        raise UnsupportedBody(f"not valid JSON (extra data at character {trailing})")
    if list_member not in scan.values:
        raise UnsupportedBody(f"the object has no {list_member!r}")
    if not found_list:
        raise UnsupportedBody(f"{list_member!r} is not a list")
    return RequestText(text, scan.values, conversation.values, conversation.spans)
