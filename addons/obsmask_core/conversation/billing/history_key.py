"""A request's place in its conversation, as the provider's prompt cache
tells conversations apart: by the prompt itself.

The table of when conversations were last seen (``last_seen``) keys each
request by a digest of its history as the cache reads it (the model, the
tools and the system prompt, then the items in order), and finds the
conversation's previous request by the digest of the same history up to
the latest request end before this one (just before the model's latest
answer). Two conversations are then one exactly while their prompts are
the same, which is when they share the provider's cache entries too: two
runs of one task that started alike part at their first different
answer, and a pause of one never makes the other's request cold.

It is made from the request alone (any proxy, after any restart, finds
the same key). ``cache_control`` members are left out: clients move their
breakpoints from request to request, and a moved breakpoint changes
nothing the cache keys on.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from obsmask_core.conversation.billing.unmarked import unmarked, unmarked_json

# What comes before the items in the provider's cache order.
HEAD_MEMBERS = ("model", "tools", "system", "instructions")
DIGEST_BYTES = 10


@dataclass(frozen=True, slots=True)
class HistoryKey:
    """``own``: the request's history; ``previous``: the history of the
    conversation's previous request (None: this is its first)."""

    own: str
    previous: str | None


def _written(value: object) -> bytes:
    """``value`` as orjson writes it, its ``cache_control`` members left out
    (``unmarked_json``, as the checkpoints write items); the json module's
    compact writing where orjson cannot (an integer past 64 bits)."""
    written = unmarked_json(value)
    if written is not None:
        return written
    return unmarked(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass"))


def history_key(members: Mapping[str, object], items: Sequence[object],
                answer_starts: Sequence[int]) -> HistoryKey:
    """The key of the request of ``items`` whose other members are
    ``members``; ``answer_starts``: where the model's answers begin among
    the items, in order (the previous request ended before the latest)."""
    digest = hashlib.sha256(_written([members.get(name) for name in HEAD_MEMBERS]))
    at = bisect.bisect_left(answer_starts, len(items)) - 1
    start = answer_starts[at] if at >= 0 else 0
    previous: str | None = None
    # The items' writing without the list's brackets, in two parts: the
    # history up to the previous request's end, then the rest. Hashed one
    # after the other they make the digest of the whole (the previous
    # request's own key is the first part's), whatever request ends it.
    if start > 0:
        digest.update(b"\n" + _written(list(items[:start]))[1:-1])
        previous = "h-" + digest.hexdigest()[:2 * DIGEST_BYTES]
        digest.update(b",")
    else:
        digest.update(b"\n")
    digest.update(_written(list(items[start:]))[1:-1])
    return HistoryKey("h-" + digest.hexdigest()[:2 * DIGEST_BYTES], previous)
