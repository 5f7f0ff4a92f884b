"""The breakpoint a client moves on: Claude Code puts a ``cache_control``
on the last block of its latest message in every request, and its next
request holds that message without it. The fast path (``reuse``) finds the
kept request in the next body once that member is taken out of its bytes
and of its parsed value alike."""

from __future__ import annotations

import re

# A cache_control member where it begins (its name), up to its flat value's end.
_MEMBER = re.compile(rb'"cache_control"\s*:\s*\{[^{}]*\}')
_CLOSING = frozenset(b"}] \t\r\n")
_SPACE = b" \t\r\n"
_NAME = b'"cache_control"'


def closing_mark(written: bytes, end: int) -> tuple[int, int] | None:
    """Where the value that closes just before ``end`` ends with a
    ``cache_control`` member, that member and the comma before it: Claude
    Code's moving breakpoint, the last member of the last block of its
    latest message, which its next request sends without. None when the
    bytes before ``end`` end otherwise."""
    at = written.rfind(_NAME, 0, end)
    if at < 0:
        return None
    member = _MEMBER.match(written, at, end)
    closing = written[member.end():end] if member is not None else b""
    # A block's member closes a list (its content) before the item closes;
    # one of the item itself is no breakpoint the API counts.
    if member is None or any(byte not in _CLOSING for byte in closing) or b"]" not in closing:
        return None
    before = at - 1
    while before >= 0 and written[before] in _SPACE:
        before -= 1
    if before < 0 or written[before] != ord(","):
        return None  # the block's only member: not a block a client marks
    return before, member.end()


def without_closing_mark(value: object) -> object | None:
    """``value`` without the ``cache_control`` member that ends it (last
    member of its last element, at any depth): a copy along that path;
    None when it does not end so. Asked only of a value whose bytes
    ``closing_mark`` found so (which also wants the member inside a list)."""
    if isinstance(value, list) and value:
        last = without_closing_mark(value[-1])
        return None if last is None else [*value[:-1], last]
    if isinstance(value, dict) and value:
        name = next(reversed(value))
        if name == "cache_control":
            return {key: item for key, item in value.items() if key != name} \
                if len(value) > 1 else None
        last = without_closing_mark(value[name])
        return None if last is None else {**value, name: last}
    return None
