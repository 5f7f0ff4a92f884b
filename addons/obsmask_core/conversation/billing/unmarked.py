"""A client's cache breakpoints are not its prompt: clients move their
``cache_control`` members from request to request (Claude Code puts one on
the last block of every request), while the provider's cache, and every
decision obsmask makes from a history, ignore them. What compares a
history across requests (its key in the table of when conversations were
last seen, the frontier's checkpoints) compares it without them."""

from __future__ import annotations

import re

import orjson

# A cache_control member as orjson writes it (compact), from its name to
# its value's end. Its value is a flat object ({"type": "ephemeral", "ttl":
# "1h"}); one that nests stays (a history that compares unequal: work
# redone, nothing wrong). Inside a string every quote is escaped: a name
# preceded by ``,`` or ``{`` is a member.
_MEMBER = re.compile(rb'"cache_control":\{[^{}]*\}')
# A cache_control member's name as orjson writes it (every one alike).
CACHE_CONTROL_WRITTEN = b'"cache_control"'
_COMMA, _OPEN = ord(","), ord("{")


def unmarked(written: bytes) -> bytes:
    """orjson's compact writing of a value, its ``cache_control`` members
    left out with the comma that separated each (the bytes themselves when
    it has none). Found with ``bytes.find``: a body holds a handful."""
    at = written.find(CACHE_CONTROL_WRITTEN)
    if at < 0:
        return written
    parts: list[bytes] = []
    kept_from = 0
    while at >= 0:
        member = _MEMBER.match(written, at)
        before = written[at - 1] if at > 0 else None
        if member is None or before not in (_COMMA, _OPEN):
            at = written.find(CACHE_CONTROL_WRITTEN, at + 1)
            continue
        start, stop = at, member.end()
        if before == _COMMA:
            start -= 1  # the comma before it goes with it
        elif written[stop:stop + 1] == b",":
            stop += 1  # the first member: the comma after it goes
        parts.append(written[kept_from:start])
        kept_from = stop
        at = written.find(CACHE_CONTROL_WRITTEN, stop)
    parts.append(written[kept_from:])
    return b"".join(parts)


# JSON's own types only: orjson would also write dataclasses, dates and
# subclasses, which a parsed body never holds.
_JSON_TYPES_ONLY = (orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
                    | orjson.OPT_PASSTHROUGH_SUBCLASS)


def unmarked_json(value: object) -> bytes | None:
    """orjson's writing of a parsed value, its ``cache_control`` members
    left out; None when orjson cannot write it (an integer past 64 bits)."""
    try:
        return unmarked(orjson.dumps(value, option=_JSON_TYPES_ONLY))
    except (TypeError, orjson.JSONEncodeError):
        return None
