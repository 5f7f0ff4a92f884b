"""A client's cache breakpoints are not its prompt: clients move their
``cache_control`` members from request to request (Claude Code puts one on
the last block of every request), while the provider's cache, and every
decision obsmask makes from a history, ignore them. What compares a
history across requests (its key in the table of when conversations were
last seen, the frontier's checkpoints) compares it without them."""

from __future__ import annotations

import re

# A cache_control member as orjson writes it (compact): after a ``,``
# (removed with it), or opening its object (then the comma after it goes).
# Inside a string every quote is escaped, so neither form can match there.
# Its value is a flat object ({"type": "ephemeral", "ttl": "1h"}); one that
# nests stays (a history that compares unequal: work redone, nothing wrong).
_AFTER_A_MEMBER = re.compile(rb',"cache_control":\{[^{}]*\}')
_FIRST_MEMBER = re.compile(rb'\{"cache_control":\{[^{}]*\},?')
_MARK = b'"cache_control"'


def unmarked(written: bytes) -> bytes:
    """orjson's compact writing of a value, its ``cache_control`` members
    left out (the bytes themselves when it has none)."""
    if _MARK not in written:
        return written
    return _FIRST_MEMBER.sub(b"{", _AFTER_A_MEMBER.sub(b"", written))


# A cache_control member where it begins (its name), up to its flat value's end.
_MEMBER = re.compile(rb'"cache_control"\s*:\s*\{[^{}]*\}')
_CLOSING = frozenset(b"}] \t\r\n")
_SPACE = b" \t\r\n"


def closing_mark(written: bytes, end: int) -> tuple[int, int] | None:
    """Where the value that closes just before ``end`` ends with a
    ``cache_control`` member, that member and the comma before it: Claude
    Code's moving breakpoint, the last member of the last block of its
    latest message, which its next request sends without. None when the
    bytes before ``end`` end otherwise."""
    at = written.rfind(_MARK, 0, end)
    if at < 0:
        return None
    member = _MEMBER.match(written, at, end)
    if member is None or any(byte not in _CLOSING for byte in written[member.end():end]):
        return None
    before = at - 1
    while before >= 0 and written[before] in _SPACE:
        before -= 1
    if before < 0 or written[before] != ord(","):
        return None  # the block's only member: not a block a client marks
    return before, member.end()


def without_closing_mark(value: object) -> object | None:
    """``value`` without the ``cache_control`` member that ends it (last
    member of its last element, at any depth), as ``closing_mark`` finds
    its bytes: a copy along that path; None when it does not end so."""
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
