"""The store of cut MCP strings in a Redis server that several proxies
share: a string cut by one proxy is recalled through any other, and stays
when they restart.

The same bounds as the SQLite store (``store.py``), in Redis's own terms:

- age: each entry is a key whose TTL is ``max_age_seconds``, set again at
  every put of the same id, so Redis itself drops an entry not cut again
  for that long; a get also refuses an entry older than that by its
  stored time (clocks of several proxies, a TTL not yet run out).
- size: a sorted set of the ids by the time they were last put, and a
  running total of their bytes (the compressed text and ``ENTRY_OVERHEAD``
  each for the keys and books); a put that takes the total past
  ``max_bytes`` drops the oldest entries until it fits, the one just put
  last. One Lua script does a put and its bounds, so that two proxies
  putting at once never see half of the other's books.
- compression as the SQLite store: UTF-8 with lone surrogates kept, zlib
  level 1 (``store.compress_text``).

Keys, under ``key_prefix`` (several deployments may share a server):
``<prefix>recall:<id>`` (a hash: ``t`` the time it was put, ``d`` the
compressed text), ``<prefix>recall:by-age`` (sorted set), ``<prefix>recall:
sizes`` (hash id -> bytes) and ``<prefix>recall:bytes`` (the total). The
script names the entries' keys itself: one server (or a primary with its
replicas), not Redis Cluster.

Every failure of the server or the link is a StoreError naming the server
(never its password); nothing here waits longer than the client's short
timeouts (``shared.redis_link``).
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis

from obsmask_core.recall.store import (
    MAX_SHARE_OF_ONE_TEXT,
    StoredText,
    StoreError,
    compress_text,
    decompress_text,
)
from obsmask_core.shared.redis_link import LinkErrors, redacted, redis_client

# Bytes counted for an entry besides its compressed text: its key, its
# member in the sorted set and its field in the sizes hash, and Redis's own
# overhead for each (about what `MEMORY USAGE` gives for a small entry).
ENTRY_OVERHEAD = 256
# A put drops at most this many entries past their age at a time (the rest
# at the next puts), so that one script never holds the server long.
EXPIRED_PER_PUT = 1000
# The link's waits: connecting, and one command (a put of the largest cut
# string, compressed, included). The store is used from worker threads,
# never from the event loop; these only bound how long a thread waits.
CONNECT_SECONDS = 0.5
ANSWER_SECONDS = 5.0

# KEYS: by-age, sizes, bytes. ARGV: entry key prefix, id, now, max age
# (seconds), TTL (ms), max bytes, "1" with data / "0" refresh only, data.
# Returns 1 kept, 0 not kept (it alone outgrows the cap), -1 nothing to
# refresh (the caller sends the data).
_PUT = """
local by_age, sizes, total = KEYS[1], KEYS[2], KEYS[3]
local prefix, id, now_text = ARGV[1], ARGV[2], ARGV[3]
local now = tonumber(now_text)
local oldest_kept = now - tonumber(ARGV[4])
local ttl_ms, max_bytes = ARGV[5], tonumber(ARGV[6])
local key = prefix .. id

local function drop(member)
  local size = tonumber(redis.call('HGET', sizes, member) or '0')
  redis.call('DEL', prefix .. member)
  redis.call('HDEL', sizes, member)
  redis.call('ZREM', by_age, member)
  redis.call('DECRBY', total, size)
end

for _, member in ipairs(redis.call('ZRANGEBYSCORE', by_age, '-inf', '(' .. oldest_kept,
                                   'LIMIT', 0, tonumber(ARGV[9]))) do
  drop(member)
end
if redis.call('EXISTS', key) == 1 and redis.call('HEXISTS', sizes, id) == 1 then
  redis.call('HSET', key, 't', now_text)
  redis.call('PEXPIRE', key, ttl_ms)
  redis.call('ZADD', by_age, now, id)
  return 1
end
if ARGV[7] == '0' then
  if redis.call('HEXISTS', sizes, id) == 1 then drop(id) end
  return -1
end
local size = string.len(ARGV[8]) + tonumber(ARGV[10])
redis.call('HSET', key, 't', now_text, 'd', ARGV[8])
redis.call('PEXPIRE', key, ttl_ms)
redis.call('ZADD', by_age, now, id)
redis.call('HSET', sizes, id, size)
local used = redis.call('INCRBY', total, size)
while used > max_bytes do
  local oldest = redis.call('ZRANGE', by_age, 0, 1)
  local victim = oldest[1]
  if victim == id then victim = oldest[2] end
  if victim == nil then
    drop(id)
    return 0
  end
  drop(victim)
  used = tonumber(redis.call('GET', total))
end
return 1
"""


class RedisRecallStore:
    """The whole texts of cut MCP strings, by id, in the Redis server at
    ``url`` under ``key_prefix``. Safe to use from several threads (redis-py
    gives each command a connection of its pool) and from several
    processes (each put is one script)."""

    def __init__(self, url: str, *, key_prefix: str, max_bytes: int,
                 max_age_seconds: float, clock: Callable[[], float] = time.time) -> None:
        # Nothing is connected here: the first command connects.
        self._url = url
        self._max_bytes = max_bytes
        self._max_age_seconds = max_age_seconds
        self._clock = clock
        self._entry_prefix = f"{key_prefix}recall:"
        self._books = [f"{key_prefix}recall:by-age", f"{key_prefix}recall:sizes",
                       f"{key_prefix}recall:bytes"]
        self._lock = threading.Lock()
        self._client: redis.Redis | None = None

    @property
    def where(self) -> str:
        return redacted(self._url)

    def put(self, recall_id: str, text: str) -> bool:
        """Keep ``text`` under ``recall_id`` and enforce the bounds. True
        when it is kept; False when it alone would take more than a quarter
        of the cap (then nothing changes) or more than the whole cap."""
        # Ids are hashes of the text: an id already there holds this very
        # text, so a put again only refreshes its age (no need to compress
        # the text again, nor to send it).
        if self._put(recall_id, b"") == 1:
            return True
        with self._errors():
            data = compress_text(text)
        if len(data) > self._max_bytes // MAX_SHARE_OF_ONE_TEXT:
            return False
        return self._put(recall_id, data) == 1

    def get(self, recall_id: str) -> StoredText | None:
        """The text kept under ``recall_id``, or None when there is none or
        it is older than ``max_age_seconds``."""
        with self._errors():
            reply: object = self._connect().hmget(self._entry_prefix + recall_id, ["t", "d"])
            if not isinstance(reply, list) or len(reply) != 2:
                raise redis.DataError(f"entry {recall_id} is not (t, d): {reply!r}")
            stored, data = reply
            if stored is None or data is None:
                return None
            if not isinstance(stored, bytes) or not isinstance(data, bytes):
                raise redis.DataError(f"entry {recall_id} has the wrong types")
            stored_at = float(stored)
            if stored_at < self._clock() - self._max_age_seconds:
                return None
            return StoredText(decompress_text(data), stored_at)

    def used_bytes(self) -> int:
        """The bytes the store counts against its cap (0 when empty)."""
        with self._errors():
            value: object = self._connect().get(self._books[2])
            return int(value) if isinstance(value, bytes) else 0

    def close(self) -> None:
        """Close the pool's connections (a later use opens new ones)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def _put(self, recall_id: str, data: bytes) -> int:
        now = self._clock()
        with self._errors():
            result: object = self._connect().eval(
                _PUT, len(self._books), *self._books,
                self._entry_prefix, recall_id, repr(now), repr(self._max_age_seconds),
                max(1, math.ceil(self._max_age_seconds * 1000)), self._max_bytes,
                "1" if data else "0", data, EXPIRED_PER_PUT, ENTRY_OVERHEAD,
            )
            if not isinstance(result, int):
                raise redis.DataError(f"the put script gave {result!r}")
            return result

    def _connect(self) -> redis.Redis:
        with self._lock:
            if self._client is None:
                self._client = redis_client(self._url, connect_seconds=CONNECT_SECONDS,
                                            answer_seconds=ANSWER_SECONDS)
            return self._client

    @contextmanager
    def _errors(self) -> Iterator[None]:
        # Whatever goes wrong below the store reaches the caller as one
        # kind of error that names the server, never as redis-py's own.
        try:
            yield
        except (*LinkErrors, zlib.error, UnicodeDecodeError, ValueError) as error:
            detail = " ".join(str(error).split()) or type(error).__name__
            raise StoreError(f"recall store {self.where}: {detail}") from error
