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
