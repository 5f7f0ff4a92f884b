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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from obsmask_core.conversation.billing.unmarked import unmarked, unmarked_json

if TYPE_CHECKING:
    from hashlib import _Hash

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


def _written_items(items: Sequence[object]) -> bytes:
    """``items`` written one after the other, a comma between two: as one
    list when orjson can write it, else each item by ``_written``. An
    item's writing must not depend on the items written with it: the key
    written whole and the key gone on from a kept digest write different
    runs of the same items (json and orjson write some floats apart)."""
    whole = unmarked_json(list(items))
    if whole is not None:
        return whole[1:-1]
    return b",".join(map(_written, items))


@dataclass(frozen=True, slots=True)
class HistoryDigest:
    """The digest of a request's history as far as its ``items`` items go
    (the head and every item), to go on from for the next request of the
    conversation, which begins with them, and that request's ``key`` (a
    retry's). ``state`` is never updated: it is copied."""

    state: _Hash
    items: int
    key: HistoryKey


def history_key(members: Mapping[str, object], items: Sequence[object],
                answer_starts: Sequence[int]) -> HistoryKey:
    """The key of the request of ``items`` whose other members are
    ``members``; ``answer_starts``: where the model's answers begin among
    the items, in order (the previous request ended before the latest)."""
    return history_of(lambda: members, items, answer_starts)[0]


def history_of(members: Callable[[], Mapping[str, object]], items: Sequence[object],
               answer_starts: Sequence[int], kept: HistoryDigest | None = None,
               ) -> tuple[HistoryKey, HistoryDigest]:
    """``history_key``, and the digest to go on from; ``members`` gives the
    request's other members. With ``kept`` (the digest of a request whose
    items and other members this one begins with), only the items after
    them are written: the members and the kept items are not read, unless
    the previous request ended among them; the same request again (a
    retry) is the kept key."""
    if kept is not None and kept.items == len(items):
        return kept.key, kept  # the same request again
    at = bisect.bisect_left(answer_starts, len(items)) - 1
    start = answer_starts[at] if at >= 0 else 0
    if kept is not None and kept.items <= start:
        return _went_on(kept, items, start)
    head = members()
    digest = hashlib.sha256(_written([head.get(name) for name in HEAD_MEMBERS]))
    previous: str | None = None
    # The items' writing without the list's brackets, in two parts: the
    # history up to the previous request's end, then the rest. Hashed one
    # after the other they make the digest of the whole (the previous
    # request's own key is the first part's), whatever request ends it.
    if start > 0:
        digest.update(b"\n" + _written_items(items[:start]))
        previous = _key(digest)
        digest.update(b",")
    else:
        digest.update(b"\n")
    digest.update(_written_items(items[start:]))
    key = HistoryKey(_key(digest), previous)
    return key, HistoryDigest(digest.copy(), len(items), key)


def _went_on(kept: HistoryDigest, items: Sequence[object],
             start: int) -> tuple[HistoryKey, HistoryDigest]:
    """The key of a request that begins with ``kept``'s items, and its
    previous request's (which ends at ``start``, not before them)."""
    digest = kept.state.copy()
    # Each part after the first is written after a comma, as one list's
    # items are.
    written = bool(kept.items)
    previous: str | None = None
    for part in (items[kept.items:start], items[start:]):
        if part:
            digest.update((b"," if written else b"") + _written_items(part))
            written = True
        if previous is None and start > 0:
            previous = _key(digest)
    key = HistoryKey(_key(digest), previous)
    return key, HistoryDigest(digest.copy(), len(items), key)


def _key(digest: _Hash) -> str:
    return "h-" + digest.hexdigest()[:2 * DIGEST_BYTES]
