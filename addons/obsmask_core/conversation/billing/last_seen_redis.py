"""The table of when conversations were last seen (``last_seen``), kept in
a Redis server that several proxies share: a pause is measured from the
conversation's latest request through any of them, and its cold ends are
the same on every proxy and after a restart, so every proxy replays the
same decisions and forwards the same bytes.

Each conversation is a hash ``<prefix>seen:<history>``, under the digest
of its latest request's history (``history_key``; a visit carries it on
there from its previous request's, which it marks ``moved``), holding
``last``: the time of its latest request; ``cold``: its cold ends, oldest
first, at most ``COLD_ENDS_KEPT``; ``doubt``: its doubtful ends, the
same way; with a TTL of ``KEPT_SECONDS`` set
again at each visit; a sorted set ``<prefix>seen:by-time`` orders them by
that time, and past ``CONVERSATIONS_KEPT`` the least recently seen go, as
in memory. One
Lua script does a visit, so two proxies visiting at once each see the
other's whole.

The provider's brake (``last_seen``, ``brake``) is two more fields of the
hash: ``surprise`` (a float, added to with HINCRBYFLOAT) and ``braked``
(the request end from which the frontier no longer moves), set once by a
second script when the sum goes past the room the answer's bill left.

Planning visits the table on the event loop (a small body) or on the
worker thread (a big one), so a server out of reach must never hold it up:
the client waits at most ``CONNECT_SECONDS`` and ``ANSWER_SECONDS``, and
after a failure the table is not asked again for ``RETRY_SECONDS``. In the
meantime, and whenever it fails, the visit is made in this proxy's own
table in memory, which also keeps what the server answered: the table is
loss-tolerant (``last_seen``), and once the server is back a conversation
this proxy kept moving is not taken for paused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from obsmask_core.conversation.billing.history_key import HistoryKey
from obsmask_core.conversation.billing.last_seen import (
    COLD_ENDS_KEPT,
    CONVERSATIONS_KEPT,
    Braking,
    LastSeen,
    Sighting,
)
from obsmask_core.shared.redis_link import LinkErrors, redis_client

# A conversation not seen for this long leaves the server (its cold ends
# are then unknown, as after a restart without a shared table).
KEPT_SECONDS = 30 * 24 * 3600
CONNECT_SECONDS = 0.2
ANSWER_SECONDS = 0.2
RETRY_SECONDS = 5.0

# Lua: the conversation ``key`` seen at ``now``, in the sorted set: those
# unseen for longer than ``ttl`` leave it, and past ``kept`` the least
# recently seen go, their hashes with them.
_SEEN_AT = """
local function seen_at(by_time, key, now, ttl, kept)
  redis.call('ZADD', by_time, now, key)
  redis.call('ZREMRANGEBYSCORE', by_time, '-inf', '(' .. (now - ttl))
  local extra = redis.call('ZCARD', by_time) - kept
  if extra > 0 then
    for _, old in ipairs(redis.call('ZRANGE', by_time, 0, extra - 1)) do
      redis.call('DEL', old)
    end
    redis.call('ZREMRANGEBYRANK', by_time, 0, extra - 1)
  end
end
"""

# KEYS: the request's own history's hash, its previous request's (its own
# again when it has none), the sorted set. ARGV: now, end, lifetime, cold
# ends kept, TTL (seconds), this proxy's last time for it (or ""),
# conversations kept, this proxy's cold ends for it (comma separated: the
# ones it found while the server was out of reach join the server's), this
# proxy's braked end for it (or ""), the doubtful pause (seconds, "" for
# none), this proxy's doubtful ends for it. The conversation is the hash of the
# request's own history (a request sent again) or its previous request's,
# whichever was seen later, copied to the own one; the previous one is
# marked ``moved``, and a second request going on from it (a fork) is
# never cold (see ``LastSeen.visit``). This proxy's last time only
# pushes the server's later: when the server holds neither hash, the
# conversation may have moved on through another proxy (which read its
# prefix since), and it is new, as to a table in memory. Returns the cold
# ends, comma separated, in their order (ends only grow within a
# conversation: the smallest are the oldest, and go first), the braked
# end ("": none), and the doubtful ends as the cold ones.
_VISIT = _SEEN_AT + """
local own, previous, by_time = KEYS[1], KEYS[2], KEYS[3]
local now, end_text = tonumber(ARGV[1]), ARGV[2]
local lifetime, kept = tonumber(ARGV[3]), tonumber(ARGV[4])
local source = own
local seen = redis.call('HMGET', own, 'last', 'cold', 'surprise', 'braked', 'moved', 'doubt')
if previous ~= own then
  local before = redis.call('HMGET', previous, 'last', 'cold', 'surprise', 'braked', 'moved',
                            'doubt')
  local before_last = tonumber(before[1])
  if before_last ~= nil and (tonumber(seen[1]) == nil or before_last > tonumber(seen[1])) then
    source, seen = previous, before
    redis.call('HSET', previous, 'moved', '1')
  end
end
local last = tonumber(seen[1])
local known = tonumber(ARGV[6])
-- This proxy's own sighting counts only when it is no older than the
-- server's (one it made while the server was out of reach).
local mine = known ~= nil and (last == nil or known >= last)
if mine and last ~= nil then last = known end
-- Gone on from by a later request: when its prefix was last read is unknown.
if seen[5] then last = now end
local function listed(stored, mine_too)
  local ends, present = {}, {}
  for e in string.gmatch((stored or '') .. ',' .. (mine and mine_too or ''), '[^,]+') do
    if not present[e] then
      present[e] = true
      table.insert(ends, tonumber(e))
    end
  end
  return ends, present
end
local ends, present = listed(seen[2], ARGV[8])
local doubts, doubted = listed(seen[6], ARGV[11])
if last ~= nil then
  local doubtful_after = tonumber(ARGV[10])
  if now - last > lifetime then
    if not present[end_text] then table.insert(ends, tonumber(end_text)) end
  elseif doubtful_after ~= nil and now - last > doubtful_after and not present[end_text]
      and not doubted[end_text] then
    table.insert(doubts, tonumber(end_text))
  end
  if last > now then now = last end
end
local function joined(list)
  table.sort(list)
  while #list > kept do table.remove(list, 1) end
  return table.concat(list, ',')
end
local cold, doubt = joined(ends), joined(doubts)
local braked = seen[4]
if not braked and mine and ARGV[9] ~= '' then braked = ARGV[9] end
if source ~= own then
  redis.call('HDEL', own, 'surprise', 'braked', 'moved')
  if seen[3] then redis.call('HSET', own, 'surprise', seen[3]) end
end
redis.call('HSET', own, 'last', string.format('%.6f', now), 'cold', cold, 'doubt', doubt)
if braked then redis.call('HSET', own, 'braked', braked) end
redis.call('EXPIRE', own, ARGV[5])
seen_at(by_time, own, now, tonumber(ARGV[5]), tonumber(ARGV[7]))
return {cold, braked or '', doubt}
"""

# KEYS: the conversation's hash, the sorted set. ARGV: now, surprise, room,
# the request's end, TTL, conversations kept. A conversation the server
# does not know is taken as seen now, and the set is trimmed as a visit
# trims it (with cold_after_seconds off, no visit does). Returns the
# surprise so far, the braked end ("" for none) and 1 when this call
# braked it.
_SURPRISE = _SEEN_AT + """
local key, by_time = KEYS[1], KEYS[2]
if redis.call('HSETNX', key, 'last', ARGV[1]) == 1 then
  seen_at(by_time, key, tonumber(ARGV[1]), tonumber(ARGV[5]), tonumber(ARGV[6]))
end
local total = redis.call('HINCRBYFLOAT', key, 'surprise', ARGV[2])
local braked = redis.call('HGET', key, 'braked')
local tripped = 0
if not braked and tonumber(total) > tonumber(ARGV[3]) then
  braked = tostring(tonumber(ARGV[4]) + 1)
  redis.call('HSET', key, 'braked', braked)
  tripped = 1
end
redis.call('EXPIRE', key, ARGV[5])
return {total, braked or '', tripped}
"""


class RedisLastSeen:
    """When each conversation was last seen, and its cold ends, in the
    Redis server at ``url`` under ``key_prefix``; this proxy's own table
    while the server is out of reach. ``failed`` is told of each failure,
    ``worked`` of each visit the server answered (the proxy logs the first
    failure and the way back)."""

    def __init__(self, url: str, *, key_prefix: str,
                 failed: Callable[[BaseException], None] = lambda _error: None,
                 worked: Callable[[], None] = lambda: None,
                 conversations: int = CONVERSATIONS_KEPT, cold_ends: int = COLD_ENDS_KEPT,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.link = (url, key_prefix)
        self._prefix = f"{key_prefix}seen:"
        self._by_time = f"{key_prefix}seen:by-time"
        self._conversations = conversations
        self._cold_ends = cold_ends
        self._failed = failed
        self._worked = worked
        self._monotonic = monotonic
        self.local = LastSeen(conversations, cold_ends)
        self._client = redis_client(url, connect_seconds=CONNECT_SECONDS,
                                    answer_seconds=ANSWER_SECONDS)
        self._lock = threading.Lock()
        self._retry_at = 0.0

    def visit(self, key: HistoryKey, now: float, end: int, lifetime: float,
              doubtful_after: float | None = None) -> Sighting:
        """As ``LastSeen.visit``, across every proxy that shares the server."""
        if not self._asking():
            return self.local.visit(key, now, end, lifetime, doubtful_after)
        mine = self.local.sighting(key)
        known, found = mine if mine is not None else (None, Sighting())
        try:
            reply: object = self._client.eval(
                _VISIT, 3, self._prefix + key.own,
                self._prefix + (key.previous if key.previous is not None else key.own),
                self._by_time, repr(now), str(end), repr(float(lifetime)), self._cold_ends,
                KEPT_SECONDS, "" if known is None else repr(known), self._conversations,
                ",".join(map(str, sorted(found.cold_ends))),
                "" if found.braked_from is None else str(found.braked_from),
                "" if doubtful_after is None else repr(float(doubtful_after)),
                ",".join(map(str, sorted(found.doubtful_ends))),
            )
            if not isinstance(reply, list) or len(reply) != 3:
                raise ValueError(f"the table answered {reply!r}")
            sighting = Sighting(_ends(reply[0]), _braked(reply[1] or None), _ends(reply[2]))
        except (*LinkErrors, ValueError) as error:
            self._down(error)
            return self.local.visit(key, now, end, lifetime, doubtful_after)
        self._worked()
        self.local.remember(key, max(now, known or now), sighting)
        return sighting

    def add_surprise(self, conversation: str, now: float, surprise: float, room: float,
                     end: int) -> Braking:
        """As ``LastSeen.add_surprise``, across every proxy that shares the server."""
        if not self._asking():
            return self.local.add_surprise(conversation, now, surprise, room, end)
        try:
            reply: object = self._client.eval(
                _SURPRISE, 2, self._prefix + conversation, self._by_time, repr(now),
                repr(float(surprise)), repr(float(room)), str(end), KEPT_SECONDS,
                self._conversations)
            if not isinstance(reply, list) or len(reply) != 3:
                raise ValueError(f"the table answered {reply!r}")
            total, braked, tripped = reply
            if not isinstance(total, bytes):
                raise ValueError(f"the table answered {reply!r}")
            braking = Braking(float(total), _braked(braked or None), tripped == 1)
        except (*LinkErrors, ValueError) as error:
            self._down(error)
            return self.local.add_surprise(conversation, now, surprise, room, end)
        self._worked()
        self.local.remember_brake(conversation, braking.surprise, braking.braked_from)
        return braking

    def close(self) -> None:
        self._client.close()

    def _asking(self) -> bool:
        with self._lock:
            return self._monotonic() >= self._retry_at

    def _down(self, error: BaseException) -> None:
        with self._lock:
            self._retry_at = self._monotonic() + RETRY_SECONDS
        self._failed(error)


def _ends(reply: object) -> frozenset[int]:
    """The cold or doubtful ends of a reply (b"12,40", b"" or None);
    ValueError for anything else."""
    if reply is None:
        return frozenset()
    if not isinstance(reply, bytes):
        raise ValueError(f"the table answered {reply!r}")
    return frozenset(int(end) for end in reply.split(b",") if end)


def _braked(reply: object) -> int | None:
    """The braked end of a reply (b"41" or None); ValueError for anything else."""
    if reply is None:
        return None
    if not isinstance(reply, bytes):
        raise ValueError(f"the table answered {reply!r}")
    return int(reply)
