"""When each conversation was last seen, and the requests at which it came
back after its prompt cache had expired: its cold ends.

A provider's prompt cache forgets a prefix nobody read for its lifetime
(Anthropic: 5 minutes, an hour for entries written with ``ttl: "1h"``;
OpenAI: its in-memory cache typically after 5 to 10 minutes of inactivity,
always within an hour, a day with ``prompt_cache_retention: "24h"``). A
request of a conversation last seen longer ago than that is billed whole,
as the client sent it as well as as obsmask forwards it: a move of the
frontier then re-bills nothing, and the frontier may catch up
(``BillingTerms(cold_ends=...)``). Every later request of the conversation
holds that request as a prefix and must replay it as cold too, so that it
makes the same decisions and forwards the same bytes: the table keeps, per
conversation, the request ends (numbers of items) at which it came back
cold, and every request is planned with them.

A pause between the shortest time the provider may keep an entry and the
longest is doubtful: not cold, but the table keeps its request end too,
after which the ledger counts on no entry that request did not write
(``Billing.doubt``), the reading least favourable to masking.

A conversation is known by its history (``history_key``): each request
is kept under the digest of its own, and found by the next one under the
digest of the history up to the latest request end before that one; a
visit carries the conversation's entry on from the one to the other (the
one left behind marked as gone on from: see ``LastSeen.visit``). Two
conversations are one only while their prompts are the same (as for the
provider's cache), and a request this table did not see before (another
proxy's, without a shared table) begins a conversation it knows nothing
of: no cold end is ever found from a pause it did not see whole.

In memory, bounded by conversations (the one seen least recently goes
first), and loss-tolerant: after a restart, on another proxy, or once a
conversation was dropped, its cold ends are unknown and its replay runs as
if the cache had stayed warm. That loses savings (the frontier does not
catch up, and a request whose replay lost a cold end forwards other
bytes than the request before it: the provider bills it again from the
first difference), never correctness: every body is still a valid request,
made and checked like every other.

A pause is seen by this proxy only: behind a load balancer that spreads a
conversation's requests over several proxies, one of them may take for
expired a cache another one kept warm, and the move it allows then re-bills
what the ledger counted as free. Such a deployment keeps each conversation
on one proxy, leaves this off, or keeps the table in a Redis server the
proxies share (``last_seen_redis.RedisLastSeen``, ``[recall] store``):
``LastSeenTable`` is what planning asks of either table.

The table also keeps, per conversation, the provider's brake (``brake``):
the sum of what its reported figures cost beyond the ledger's predictions
(its surprise), and once that sum took the bill so far past the allowance,
the request end from which the frontier no longer moves (``braked_from``).
Every later request of the conversation is planned with it, so they all
replay the same decisions. Lost (a restart), the brake is off again until
the provider's figures trip it anew.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Protocol

from obsmask_core.conversation.billing.cache_lifetime import Lifetime
from obsmask_core.conversation.billing.history_key import HistoryKey

# Conversations remembered: a name, a time and a few integers each, so a
# bound in entries is a bound in memory (a few hundred bytes each).
CONVERSATIONS_KEPT = 50_000
# Cold ends remembered per conversation (one per long pause); past this the
# oldest goes: the requests after it replay it as warm (savings lost once).
COLD_ENDS_KEPT = 64

class LastSeenTable(Protocol):
    """When conversations were last seen and their cold ends, as planning
    reads them: from the event loop and the worker thread at once."""

    def visit(self, key: HistoryKey, now: float, end: int, lifetime: float,
              doubtful_after: float | None = None) -> Sighting:
        """A request of ``end`` items at ``now``: its conversation's cold
        and doubtful ends, and its brake (see ``LastSeen.visit``)."""
        ...

    def add_surprise(self, conversation: str, now: float, surprise: float, room: float,
                     end: int) -> Braking:
        """Add one answer's ``surprise`` to the conversation's (``conversation``:
        its request's ``HistoryKey.own``); when the sum goes past ``room``
        (``brake.room``) and it is not braked yet, brake it from after the
        request of ``end`` items."""
        ...


@dataclass(frozen=True, slots=True)
class Sighting:
    """What a visit found: the conversation's cold ends, this request's
    among them when it came back cold, where the provider's brake stopped
    its frontier (None: it did not), and its doubtful ends."""

    cold_ends: frozenset[int] = frozenset()
    braked_from: int | None = None
    doubtful_ends: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class Braking:
    """A conversation's brake after an answer: its surprise so far, where
    its frontier stopped (None: it did not), and whether this answer
    stopped it."""

    surprise: float
    braked_from: int | None
    tripped: bool


@dataclass(slots=True)
class _Seen:
    last: float
    cold: tuple[int, ...]
    doubtful: tuple[int, ...] = ()
    surprise: float = 0.0
    braked_from: int | None = None
    # A later request went on from it: another that does too is a fork.
    moved: bool = False

    def sighting(self) -> Sighting:
        return Sighting(frozenset(self.cold), self.braked_from, frozenset(self.doubtful))


class LastSeen:
    """The time each conversation was last seen, and its cold ends. Shared
    by the event loop and the worker thread, hence the lock."""

    def __init__(self, conversations: int = CONVERSATIONS_KEPT,
                 cold_ends: int = COLD_ENDS_KEPT) -> None:
        self._conversations = conversations
        self._cold_ends = cold_ends
        self._kept: OrderedDict[str, _Seen] = OrderedDict()
        self._lock = threading.Lock()

    def visit(self, key: HistoryKey, now: float, end: int, lifetime: float,
              doubtful_after: float | None = None) -> Sighting:
        """A request of ``end`` items at ``now``, its history ``key``: its
        conversation is the entry kept under its own history (a request
        sent again) or under its previous request's, whichever was seen
        later (an identical run long ago left the other); from the
        previous one it is copied to its own, the previous entry marked
        as gone on from. When it was last seen more than ``lifetime``
        seconds before, ``end`` is a cold end (more than ``doubtful_after``:
        a doubtful one). A conversation never seen
        before has none: it may be new, or seen by another proxy, or
        before a restart, and a cache taken for cold while it is warm
        would make a move look free that is not. Nor has a fork (a second
        request going on from the same previous one): the other branch
        kept the shared prefix's cache warm meanwhile, unseen here."""
        with self._lock:
            own = self._kept.get(key.own)
            before = self._kept.get(key.previous) if key.previous is not None else None
            if own is not None and (before is None or own.last >= before.last):
                seen, went_on = own, own.moved
            elif before is not None:
                seen = replace(before, moved=False)
                went_on, before.moved = before.moved, True
                # Gone on from: the first to leave when the table is full.
                self._kept.move_to_end(key.previous, last=False)  # type: ignore[arg-type]
            else:
                seen, went_on = _Seen(now, ()), False
            # An entry a later request went on from: that request read its
            # prefix later than it says (a fork, or this request sent again
            # after the conversation went on): when is unknown here.
            if not went_on and now - seen.last > lifetime and end not in seen.cold:
                seen.cold = (*seen.cold, end)[-self._cold_ends:]
            elif not went_on and doubtful_after is not None and now - seen.last > \
                    doubtful_after and end not in (*seen.doubtful, *seen.cold):
                seen.doubtful = (*seen.doubtful, end)[-self._cold_ends:]
            # Planned out of their order (a worker thread): the latest time stays.
            seen.last = max(seen.last, now)
            self._kept.pop(key.own, None)
            self._keep(key.own, seen)
            return seen.sighting()

    def _keep(self, conversation: str, seen: _Seen) -> None:
        """Keep ``seen`` as the most recently seen (the lock held)."""
        self._kept[conversation] = seen
        while len(self._kept) > self._conversations:
            self._kept.popitem(last=False)

    def sighting(self, key: HistoryKey) -> tuple[float, Sighting] | None:
        """When the conversation of ``key`` was last seen here, and what a
        visit would find, without one; None when it is not here."""
        with self._lock:
            own = self._kept.get(key.own)
            before = self._kept.get(key.previous) if key.previous is not None else None
            seen = own if own is not None and (before is None or own.last >= before.last) \
                else before
            if seen is None or seen.moved:
                return None  # gone on from: when its prefix was last read is unknown
            return seen.last, seen.sighting()

    def braked_from(self, conversation: str) -> int | None:
        """Where the conversation's frontier stopped; None: it did not."""
        with self._lock:
            seen = self._kept.get(conversation)
            return seen.braked_from if seen is not None else None

    def add_surprise(self, conversation: str, now: float, surprise: float, room: float,
                     end: int) -> Braking:
        """See ``LastSeenTable.add_surprise``. A conversation not here is
        taken as seen ``now`` (its answer came now)."""
        with self._lock:
            seen = self._kept.pop(conversation, None)
            if seen is None:
                seen = _Seen(now, ())
            seen.surprise += surprise
            tripped = seen.braked_from is None and seen.surprise > room
            if tripped:
                seen.braked_from = end + 1
            self._keep(conversation, seen)
            return Braking(seen.surprise, seen.braked_from, tripped)

    def remember_brake(self, conversation: str, surprise: float,
                       braked_from: int | None) -> None:
        """Take the brake another table holds for ``conversation`` (kept
        only while the conversation is here)."""
        with self._lock:
            seen = self._kept.get(conversation)
            if seen is not None:
                seen.surprise, seen.braked_from = surprise, braked_from

    def remember(self, key: HistoryKey, last: float, found: Sighting,
                 surprise: float | None = None) -> None:
        """Take what another table found for the conversation of ``key`` (a
        shared one, ``last_seen_redis``): seen last at ``last``, with these
        cold ends and brake, now under its own history."""
        with self._lock:
            old = self._kept.pop(key.own, None)
            if key.previous is not None:
                old = self._kept.pop(key.previous, None) or old
            seen = _Seen(last, tuple(sorted(found.cold_ends))[-self._cold_ends:],
                         tuple(sorted(found.doubtful_ends))[-self._cold_ends:],
                         braked_from=found.braked_from)
            if surprise is not None:
                seen.surprise = surprise
            elif old is not None:
                seen.surprise = old.surprise
            self._keep(key.own, seen)

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


@dataclass(frozen=True)
class Visit:
    """A request's arrival at ``now``: planning it visits ``table``."""

    table: LastSeenTable
    now: float

    def of(self, key: HistoryKey, end: int, lifetime: float,
           doubtful_after: float | None = None) -> Sighting:
        return self.table.visit(key, self.now, end, lifetime, doubtful_after)


@dataclass(frozen=True)
class Recorded:
    """What a flow's planning found in the table (its bill's ``cold_ends``
    and ``braked_from``): planning it again, for the content view, finds
    the same, without visiting the table."""

    cold_ends: frozenset[int]
    braked: int | None = None
    doubtful_ends: frozenset[int] = frozenset()

    def of(self, key: HistoryKey, end: int, lifetime: float,
           doubtful_after: float | None = None) -> Sighting:
        return Sighting(self.cold_ends, self.braked, self.doubtful_ends)


Arrival = Visit | Recorded


@dataclass(frozen=True, slots=True)
class TableVisit:
    """How a request visits the table: under its history's ``key``, as a
    request of ``items`` items, a pause as long as ``lifetime`` says
    being cold or doubtful. The same bytes under the same policy visit
    alike."""

    key: HistoryKey
    items: int
    lifetime: Lifetime

    def at(self, arrival: Arrival) -> Sighting:
        return arrival.of(self.key, self.items, self.lifetime.cold_after,
                          self.lifetime.doubtful_after)
