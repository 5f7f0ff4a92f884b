"""The store of cut MCP strings: the whole of every string that MCP
truncation cut, kept under its ``cut-...`` id so that the ``recall`` tool
can give it back later, also after the proxy restarted and from another
proxy that shares the data directory.

One SQLite file (stdlib ``sqlite3``; ``sqlite_file.py`` opens, writes and
measures it), bounded twice: an entry goes when it is older than
``max_age_seconds`` (since it was last put), and the oldest go first when
the file would outgrow ``max_bytes``. It is a cache, never the truth: a
string it no longer holds is only a recall that says so.

``RecallStorage`` is what the proxy asks of a store; ``RecallStore`` (this
file) and ``redis_store.RedisRecallStore`` (a Redis server several proxies
share, with the same bounds and the same compressed bytes) both are one.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from obsmask_core.recall import sqlite_file

# A text may take at most this share of the cap, so that one put never
# empties the store for a single string.
MAX_SHARE_OF_ONE_TEXT = 4
# Lone surrogates (JSON allows "\ud800") must come back as they were.
_ENCODING = ("utf-8", "surrogatepass")
COMPRESSION_LEVEL = 1


@dataclass(frozen=True)
class StoredText:
    """A text the store holds, and when it was last put."""

    text: str
    # Seconds since the epoch, when it was last put.
    stored_at: float


class StoreError(Exception):
    """The store cannot be used (disk full, corrupt or unreadable file,
    unwritable directory, a Redis server out of reach); the message is one
    line naming the file or the server."""


class RecallStorage(Protocol):
    """A store of cut MCP strings, as the proxy uses it: from any thread,
    every failure a StoreError."""

    @property
    def where(self) -> str:
        """The file or server, as a log line names it."""
        ...

    def put(self, recall_id: str, text: str) -> bool:
        """Keep ``text`` under ``recall_id`` (its age starts again), within
        the bounds; False when it alone is too large to be kept."""
        ...

    def get(self, recall_id: str) -> StoredText | None:
        """The text kept under ``recall_id``; None when none is, or it is
        older than the age limit."""
        ...

    def close(self) -> None:
        """Let go of the file or connections (a later use opens them again)."""
        ...


def compress_text(text: str) -> bytes:
    """A text as every store keeps it: UTF-8 with lone surrogates kept
    (surrogatepass), zlib at level 1. Tool output (logs, listings, JSON)
    still shrinks several times, at a fraction of the default level's time."""
    return zlib.compress(text.encode(*_ENCODING), COMPRESSION_LEVEL)


def decompress_text(data: bytes) -> str:
    """The text ``compress_text`` made ``data`` of (zlib.error or
    UnicodeDecodeError for bytes it did not make)."""
    return zlib.decompress(data).decode(*_ENCODING)


class RecallStore:
    """The whole texts of cut MCP strings, by id, in the SQLite file
    ``path``. Safe to use from several threads, and from several processes
    on the same file."""

    def __init__(self, path: Path, *, max_bytes: int, max_age_seconds: float,
                 clock: Callable[[], float] = time.time) -> None:
        # Nothing happens here: the proxy builds the store from its settings
        # at start, and a store that is never used never touches the disk.
        self._path = path
        self._max_bytes = max_bytes
        self._max_age_seconds = max_age_seconds
        self._clock = clock
        self._connection: sqlite3.Connection | None = None
        self._page_size = 0
        # One connection for all threads (check_same_thread=False); the
        # lock keeps their statements and transactions from interleaving.
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return str(self._path)

    def put(self, recall_id: str, text: str) -> bool:
        """Keep ``text`` under ``recall_id`` and enforce the bounds. True
        when it is kept; False when it alone would take more than a quarter
        of the cap (then nothing changes)."""
        with self._lock, self._errors():
            connection = self._connect()
            now = self._clock()
            # Ids are hashes of the text: an id already there holds this very
            # text, so a put again only refreshes its age (no need to
            # compress the text again, or to write it again).
            with sqlite_file.write(connection):
                refreshed = connection.execute(
                    "UPDATE recall SET stored_at = ? WHERE id = ?", (now, recall_id)
                ).rowcount == 1
                if refreshed:
                    return self._enforce_bounds(connection, now, recall_id)
        # Compressed outside the lock and the transaction: neither a reader
        # of this store nor another process waits for it.
        with self._errors():
            data = compress_text(text)
        if len(data) > self._max_bytes // MAX_SHARE_OF_ONE_TEXT:
            return False
        with self._lock, self._errors():
            connection = self._connect()
            now = self._clock()
            with sqlite_file.write(connection):
                connection.execute(
                    "INSERT INTO recall (id, stored_at, chars, data) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (id) DO UPDATE SET stored_at = excluded.stored_at",
                    (recall_id, now, len(text), data),
                )
                return self._enforce_bounds(connection, now, recall_id)

    def get(self, recall_id: str) -> StoredText | None:
        """The text kept under ``recall_id``, or None when there is none or
        it is older than ``max_age_seconds`` (an expired entry is never
        given back, even before a put deletes it)."""
        with self._lock, self._errors():
            connection = self._connect()
            row: object = connection.execute(
                "SELECT stored_at, data FROM recall WHERE id = ?", (recall_id,)
            ).fetchone()
            if row is None:
                return None
            if not isinstance(row, tuple) or len(row) != 2:
                raise sqlite3.DatabaseError(f"entry {recall_id} is not (stored_at, data)")
            stored_at, data = row
            if not isinstance(stored_at, float) or not isinstance(data, bytes):
                raise sqlite3.DatabaseError(f"entry {recall_id} has the wrong types")
            if stored_at < self._oldest_kept(self._clock()):
                return None
        with self._errors():  # decompressed outside the lock, as put compresses
            return StoredText(decompress_text(data), stored_at)

    def disk_bytes(self) -> int:
        """The size of the database on disk: the file and its journal (or
        write-ahead log) if any; 0 before it exists."""
        with self._errors():
            return sqlite_file.disk_bytes(self._path)

    def close(self) -> None:
        """Close the file (a later use opens it again)."""
        with self._lock, self._errors():
            if self._connection is not None:
                connection, self._connection = self._connection, None
                connection.close()

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection, self._page_size = sqlite_file.open_file(self._path)
        return self._connection

    def _oldest_kept(self, now: float) -> float:
        # The one rule of age, for get and put alike: an entry stored before
        # this is expired.
        return now - self._max_age_seconds

    def _enforce_bounds(self, connection: sqlite3.Connection, now: float,
                        recall_id: str) -> bool:
        """Drop the expired entries, then the oldest ones until the file
        fits under the cap; ``recall_id`` (just put) goes last. Whether it
        is still kept."""
        connection.execute("DELETE FROM recall WHERE stored_at < ?", (self._oldest_kept(now),))
        while sqlite_file.used_bytes(connection, self._page_size) > self._max_bytes:
            # Equal ages (a coarse clock) go in the order they were inserted.
            oldest: object = connection.execute(
                "SELECT id FROM recall WHERE id != ? ORDER BY stored_at, rowid LIMIT 1",
                (recall_id,),
            ).fetchone()
            if not isinstance(oldest, tuple):
                # Only the new entry is left and it still does not fit (a cap
                # smaller than SQLite's own pages): it is not kept either.
                connection.execute("DELETE FROM recall WHERE id = ?", (recall_id,))
                return False
            connection.execute("DELETE FROM recall WHERE id = ?", oldest)
        return True

    @contextmanager
    def _errors(self) -> Iterator[None]:
        # Whatever goes wrong below the store reaches the caller as one
        # kind of error that names the file, never as sqlite3's own.
        try:
            yield
        except (sqlite3.Error, OSError, zlib.error, UnicodeDecodeError) as error:
            raise StoreError(_message(self._path, error)) from error


def _message(path: Path, error: BaseException) -> str:
    detail = " ".join(str(error).split()) or type(error).__name__
    return f"recall store {path}: {detail}"
