"""The table of when conversations were last seen (``last_seen``), kept in
a Redis server that several proxies share: a pause is measured from the
conversation's latest request through any of them, and its cold ends are
the same on every proxy and after a restart, so every proxy replays the
same decisions and forwards the same bytes.

Each conversation is a hash ``<prefix>seen:<conversation>`` (``last``: the
time of its latest request; ``cold``: its cold ends, oldest first, at most
``COLD_ENDS_KEPT``), with a TTL of ``KEPT_SECONDS`` set again at each
visit; a sorted set ``<prefix>seen:by-time`` orders them by that time, and
past ``CONVERSATIONS_KEPT`` the least recently seen go, as in memory. One
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
from typing import TypeVar

from obsmask_core.conversation.billing.last_seen import (
    COLD_ENDS_KEPT,
    CONVERSATIONS_KEPT,
    Braking,
    LastSeen,
)
from obsmask_core.shared.redis_link import LinkErrors, redis_client

_Field = TypeVar("_Field")

# A conversation not seen for this long leaves the server (its cold ends
# are then unknown, as after a restart without a shared table).
KEPT_SECONDS = 30 * 24 * 3600
CONNECT_SECONDS = 0.2
ANSWER_SECONDS = 0.2
RETRY_SECONDS = 5.0

# KEYS: the conversation's hash, the sorted set. ARGV: now, end, lifetime,
# cold ends kept, TTL (seconds), this proxy's last time for it (or ""),
# conversations kept, this proxy's cold ends for it (comma separated: the
# ones it found while the server was out of reach join the server's).
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

# Returns the cold ends, comma separated, in their order (ends only grow
# within a conversation: the smallest are the oldest, and go first).
_VISIT = _SEEN_AT + """
local key, by_time = KEYS[1], KEYS[2]
local now, end_text = tonumber(ARGV[1]), ARGV[2]
local lifetime, kept = tonumber(ARGV[3]), tonumber(ARGV[4])
local seen = redis.call('HMGET', key, 'last', 'cold')
local last = tonumber(seen[1])
local known = tonumber(ARGV[6])
if known ~= nil and (last == nil or known > last) then last = known end
local ends, present = {}, {}
local function add(e)
  if not present[e] then
    present[e] = true
    table.insert(ends, tonumber(e))
  end
end
for e in string.gmatch((seen[2] or '') .. ',' .. ARGV[8], '[^,]+') do add(e) end
if last ~= nil then
  if now - last > lifetime then add(end_text) end
  if last > now then now = last end
end
table.sort(ends)
while #ends > kept do table.remove(ends, 1) end
local cold = table.concat(ends, ',')
redis.call('HSET', key, 'last', string.format('%.6f', now), 'cold', cold)
redis.call('EXPIRE', key, ARGV[5])
seen_at(by_time, key, now, tonumber(ARGV[5]), tonumber(ARGV[7]))
return cold
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

    def visit(self, conversation: str, now: float, end: int, lifetime: float) -> frozenset[int]:
        """As ``LastSeen.visit``, across every proxy that shares the server."""
        if not self._asking():
            return self.local.visit(conversation, now, end, lifetime)
        known = self.local.last_time(conversation)
        known_cold = ",".join(map(str, sorted(self.local.cold_ends(conversation))))
        try:
            reply: object = self._client.eval(
                _VISIT, 2, self._prefix + conversation, self._by_time,
                repr(now), str(end), repr(float(lifetime)), self._cold_ends, KEPT_SECONDS,
                "" if known is None else repr(known), self._conversations, known_cold,
            )
            cold = _ends(reply)
        except (*LinkErrors, ValueError) as error:
            self._down(error)
            return self.local.visit(conversation, now, end, lifetime)
        self._worked()
        self.local.remember(conversation, max(now, known or now), cold)
        return cold

    def _field(self, conversation: str, name: str,
               read: Callable[[object], _Field]) -> tuple[_Field] | None:
        """The conversation's field ``name``, as ``read`` reads it, from the
        server; None while it is out of reach (or answers what ``read``
        refuses)."""
        if not self._asking():
            return None
        try:
            value = read(self._client.hget(self._prefix + conversation, name))
        except (*LinkErrors, ValueError) as error:
            self._down(error)
            return None
        self._worked()
        return (value,)

    def cold_ends(self, conversation: str) -> frozenset[int]:
        """The cold ends known so far: the server's, or this proxy's while
        the server is out of reach."""
        found = self._field(conversation, "cold", _ends)
        return found[0] if found is not None else self.local.cold_ends(conversation)

    def braked_from(self, conversation: str) -> int | None:
        """As ``LastSeen.braked_from``: the server's, or this proxy's while
        the server is out of reach."""
        found = self._field(conversation, "braked", _braked)
        return found[0] if found is not None else self.local.braked_from(conversation)

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
    """The cold ends of a reply (b"12,40", b"" or None); ValueError for
    anything else."""
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
