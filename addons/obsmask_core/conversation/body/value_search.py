"""Where a planned value sits in the body, found by its bytes instead of a
parse that records positions.

``request_text`` parses the body member by member with the json module to
learn where each value is: exact, but several times the cost of parsing the
whole body with orjson. Masking only needs the few values it replaces, and it
knows them (the parse gave them): a client wrote each with one of a few
encoders, so their bytes can be searched for. The encoders tried, in turn:
orjson's compact UTF-8 (JavaScript's ``JSON.stringify``, serde_json, httpx),
Python's ``json.dumps`` with its ASCII escapes, and the two other
combinations of those separators and escapes.

A match counts only where a value can start: after its member's name and
``:`` (a member: an id the value equals is no match) or ``[``/``,`` (an
element), with a value's end after it, and past the end of the previous
value found. Whatever is found is only a candidate: the masked
body is parsed again and must equal the plan exactly (``masking.verify``),
or the exact reader is used instead. A wrong guess costs time, never bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import orjson

from obsmask_core.conversation.body.request_text import PathStep
from obsmask_core.shared.json_text import Span

# A value that is not where a first match is would be a sign of an
# unusual encoder: give up on it soon and let the exact reader work.
_ATTEMPTS_PER_ENCODING = 8
_WHITESPACE = b" \t\r\n"
_AFTER_VALUE = b",}]"


Encoder = Callable[[object], bytes]


def _ascii_json(value: object) -> bytes:
    """Python's ``json.dumps`` (ASCII escapes, ", " and ": "). A string that
    orjson writes in ASCII (no DEL, which json escapes) is written alike
    by both, and orjson is much faster."""
    if isinstance(value, str):
        written = orjson.dumps(value)
        if written.isascii() and b"\x7f" not in written:
            return written
    return json.dumps(value).encode("ascii")


# Made once: ``json.dumps`` with arguments of its own makes an encoder
# for every call.
_UTF8_SPACED = json.JSONEncoder(ensure_ascii=False)
_ASCII_COMPACT = json.JSONEncoder(separators=(",", ":"))


def _utf8_json(value: object) -> bytes:
    """``json.dumps(value, ensure_ascii=False)`` in UTF-8. A string is
    written alike by orjson (every code point checked; a lone surrogate
    fails in both), which is much faster."""
    if isinstance(value, str):
        return orjson.dumps(value)
    return _UTF8_SPACED.encode(value).encode("utf-8")


def _ascii_compact_json(value: object) -> bytes:
    """``json.dumps(value, separators=(",", ":"))``."""
    return _ASCII_COMPACT.encode(value).encode("ascii")


ENCODERS: tuple[Encoder, ...] = (orjson.dumps, _ascii_json, _utf8_json, _ascii_compact_json)


def _encoded(encoder: Encoder, value: object) -> bytes | None:
    try:
        return encoder(value)
    except (TypeError, ValueError, OverflowError):
        return None  # a value orjson cannot write (an int past 64 bits...)


def byte_before(body: bytes, pos: int) -> int | None:
    """The last byte before ``pos`` that is not JSON white space."""
    pos -= 1
    while pos >= 0 and body[pos] in _WHITESPACE:
        pos -= 1
    return body[pos] if pos >= 0 else None


def _byte_after(body: bytes, pos: int) -> int | None:
    while pos < len(body) and body[pos] in _WHITESPACE:
        pos += 1
    return body[pos] if pos < len(body) else None


# The search looks for a value's first bytes and then compares the rest:
# bytes.find prepares a long needle before it scans (two-way search), which
# for a few KB of tool output costs more than the scan itself. Where many
# places begin alike (a run of "=====", outputs with a common start), the
# whole value is searched for instead, which stays linear.
_NEEDLE_BYTES = 64
_PREFIX_MISSES = 8


def _named(body: bytes, pos: int, name: bytes | None) -> bool:
    """Is the value at ``pos`` (after a ``:``) the member ``name`` (its
    JSON-encoded name; None: any)?"""
    if name is None:
        return True
    colon = pos - 1
    while colon >= 0 and body[colon] in _WHITESPACE:
        colon -= 1
    end = colon
    while end > 0 and body[end - 1] in _WHITESPACE:
        end -= 1
    return body.endswith(name, 0, end)


def _find_encoded(body: bytes, encoded: bytes, start: int, openers: bytes,
                  name: bytes | None = None) -> Span | None:
    needle = encoded[:_NEEDLE_BYTES]
    pos = body.find(needle, start)
    attempts = misses = 0
    while pos >= 0 and attempts < _ATTEMPTS_PER_ENCODING:
        if len(needle) < len(encoded) and not body.startswith(encoded, pos):
            misses += 1
            if misses >= _PREFIX_MISSES:
                needle = encoded
            pos = body.find(needle, pos + 1)
            continue
        end = pos + len(encoded)
        before = byte_before(body, pos)
        after = _byte_after(body, end)
        if before is not None and before in openers and after is not None \
                and after in _AFTER_VALUE and _named(body, pos, name):
            return pos, end
        attempts += 1
        pos = body.find(needle, pos + 1)
    return None


def _anchored(body: bytes, anchor: str | None, cursor: int) -> int:
    """Where the search for a value anchored at ``anchor`` begins: after the
    anchor's first place from ``cursor`` as a whole string value (written
    alike by every encoder when ASCII, as ids are), else at ``cursor``."""
    if anchor is None or not anchor.isascii():
        return cursor
    span = _find_encoded(body, orjson.dumps(anchor), cursor, b":[,")
    return span[1] if span is not None else cursor


def find_values(body: bytes,
                values: list[tuple[object, PathStep, str | None]]) -> list[Span] | None:
    """The spans of ``values`` (each with the last step of its path: an
    array element's index, or the name of its member, which must be
    written before it; and its anchor: a string written after every
    earlier copy of the value and before it), given in the order they are
    written; None if one is not found. A tool result that reads as its own
    call id is found as the result, not as the id written before it. An
    agent repeats outputs (the same warning, the same file): without its
    anchor a value would be found in an earlier copy that
    stays. A value not found after its anchor (a client that writes the
    anchor after the value) is looked for from the previous value's end.
    A client writes a whole body with one encoder: the one that placed a
    value is tried first for the next."""
    spans: list[Span] = []
    cursor = 0
    order = list(ENCODERS)
    for value, step, anchor in values:
        openers = b"[," if isinstance(step, int) else b":"
        name = orjson.dumps(step) if isinstance(step, str) else None
        span = None
        for start in dict.fromkeys((_anchored(body, anchor, cursor), cursor)):
            span = _find_any(body, value, start, openers, order, name)
            if span is not None:
                break
        if span is None:
            return None
        spans.append(span)
        cursor = span[1]
    return spans


def _find_any(body: bytes, value: object, start: int, openers: bytes,
              order: list[Encoder], name: bytes | None = None) -> Span | None:
    """``value``'s first span from ``start`` as any encoder writes it. The
    encoder that found it goes first in ``order``, and those whose writing
    of it was not there go last: a client writes a body with one encoder,
    so an encoder that missed a value is not the body's, even when it
    writes the next value alike (a string with no escape). Moving only
    the finder first, two encoders that each write some values as the
    client did took turns in front, and each turn's miss searched the
    rest of the body: for a body of Python's ``json.dumps`` with UTF-8
    kept, orjson found its strings with UTF-8 in them, and the spaced
    ASCII encoder its objects of ASCII text."""
    tried: set[bytes] = set()
    missed: list[Encoder] = []
    for encoder in order:
        encoded = _encoded(encoder, value)
        if encoded is None:
            continue  # it cannot write the value: nothing said of the body
        if encoded in tried:  # as an encoder that missed writes it
            missed.append(encoder)
            continue
        tried.add(encoded)
        span = _find_encoded(body, encoded, start, openers, name)
        if span is not None:
            if encoder is not order[0]:
                rest = [e for e in order if e is not encoder and e not in missed]
                order[:] = [encoder, *rest, *missed]
            return span
        missed.append(encoder)
    return None
