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
import re
from collections.abc import Callable
from dataclasses import dataclass, field

Span = tuple[int, int]

_WHITESPACE = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class NonFiniteNumber:
    """``NaN``/``Infinity`` as parsed here: equal to itself, unlike float('nan'),
    so comparing a body before and after masking is exact."""

    name: str


class UnsupportedBody(ValueError):
    """The body is not something obsmask can rewrite; the message says why."""


_decoder = json.JSONDecoder(parse_constant=NonFiniteNumber)


def loads(text: str) -> object:
    """``json.loads`` with the same constants as the span parser."""
    return _decoder.decode(text)


def _skip(text: str, pos: int) -> int:
    match = _WHITESPACE.match(text, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _value(text: str, pos: int) -> tuple[object, int]:
    try:
        return _decoder.raw_decode(text, pos)
    except json.JSONDecodeError as e:
        raise UnsupportedBody(f"not valid JSON ({e.msg} at character {e.pos})") from None
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
    pos = _skip(text, _expect(text, pos, "{", "'{'"))
    if pos < len(text) and text[pos] == "}":
        scan.end = pos + 1
        return scan
    while True:
        _expect(text, pos, '"', "a member name")  # raises unless a string starts here
        key, pos = _value(text, pos)
        assert isinstance(key, str)  # a JSON value that starts with '"' is a string
        pos = _skip(text, _expect(text, _skip(text, pos), ":", "':'"))
        value, end = member(key, text, pos)
        scan.values[key] = value
        scan.spans[key] = (pos, end)
        pos = _skip(text, end)
        if pos < len(text) and text[pos] == ",":
            pos = _skip(text, pos + 1)
            continue
        scan.end = _expect(text, pos, "}", "',' or '}'")
        return scan


@dataclass
class ChatRequestText:
    """A request body parsed for masking: its members, its messages, and the
    span of each message in the text."""

    text: str
    members: dict[str, object]
    messages: list[object]
    message_spans: list[Span]

    def content_span(self, position: int) -> Span | None:
        """Span of ``messages[position]["content"]``, if it is an object with one.

        Found on demand: only the few messages that get masked are walked
        member by member; the rest were parsed in one call each.
        """
        start, _end = self.message_spans[position]
        if not self.text.startswith("{", start):
            return None
        return scan_object(self.text, start).spans.get("content")


def parse_chat_request(text: str) -> ChatRequestText:
    """Parse a Chat Completions request body; raise UnsupportedBody if it is not one."""
    messages: list[object] = []
    message_spans: list[Span] = []
    found_list = False

    def member(key: str, text: str, pos: int) -> tuple[object, int]:
        nonlocal messages, message_spans, found_list
        if key != "messages" or not text.startswith("[", pos):
            if key == "messages":
                found_list = False
            return _value(text, pos)
        found_list = True
        messages, message_spans = [], []
        pos = _skip(text, pos + 1)
        if text.startswith("]", pos):
            return messages, pos + 1
        while True:
            value, end = _value(text, pos)
            messages.append(value)
            message_spans.append((pos, end))
            pos = _skip(text, end)
            if text.startswith(",", pos):
                pos = _skip(text, pos + 1)
                continue
            return messages, _expect(text, pos, "]", "',' or ']'")

    start = _skip(text, 0)
    if not text.startswith("{", start):
        if start < len(text) and text[start] in '["0123456789-tfn':
            raise UnsupportedBody("the JSON is not an object")
        raise UnsupportedBody(f"not valid JSON (expected '{{' at character {start})")
    scan = scan_object(text, start, member)
    trailing = _skip(text, scan.end)
    if trailing != len(text):
        raise UnsupportedBody(f"not valid JSON (extra data at character {trailing})")
    if "messages" not in scan.values:
        raise UnsupportedBody("the object has no 'messages'")
    if not found_list:
        raise UnsupportedBody("'messages' is not a list")
    return ChatRequestText(text, scan.values, messages, message_spans)


def splice(text: str, replacements: list[tuple[Span, str]]) -> str:
    """``text`` with each span replaced; spans must not overlap."""
    pieces: list[str] = []
    pos = 0
    for (start, end), new in sorted(replacements):
        if start < pos:
            raise ValueError("overlapping spans")
        pieces.append(text[pos:start])
        pieces.append(new)
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)
