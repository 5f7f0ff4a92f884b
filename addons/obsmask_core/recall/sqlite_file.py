"""The SQLite file of the recall store (``store.py``): how it is opened (its
schema, its journal), written (one short transaction at a time) and
measured (the pages its entries take, and its size on disk). The store
decides what goes in and what goes out; this only speaks SQLite.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

# Several proxies may share the file: a writer waits this long for another
# one's (short) transaction before giving up with an error.
LOCK_TIMEOUT_SECONDS = 5.0
# Files SQLite may keep next to the database (the journal while a write
# runs; -wal only if someone turned WAL on for this file).
_SIDE_FILES = ("-journal", "-wal")

_SCHEMA = (
    # auto_vacuum must be set before the first table exists (it is written
    # in the file's header then). FULL gives the pages of deleted entries
    # back to the file system at each commit: without it the file never
    # shrinks, and the cap would only bound the live data, not the disk.
    "PRAGMA auto_vacuum = FULL",
    """CREATE TABLE IF NOT EXISTS recall (
        id TEXT PRIMARY KEY,
        stored_at REAL NOT NULL,
        chars INTEGER NOT NULL,
        data BLOB NOT NULL
    )""",
    # Expiry and eviction walk the entries oldest first; without an index
    # each eviction step would scan the whole table.
    "CREATE INDEX IF NOT EXISTS recall_by_age ON recall (stored_at)",
)


def open_file(path: Path) -> tuple[sqlite3.Connection, int]:
    """A connection to the database at ``path`` (made, with its directory,
    when missing) that every thread may use, its schema in place, and its
    page size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # isolation_level=None: no implicit transactions; each write is one
    # explicit short transaction (write), each read its own statement.
    # The default rollback journal, not WAL: a WAL file grows beside
    # the database between checkpoints, outside the cap.
    connection = sqlite3.connect(
        path, timeout=LOCK_TIMEOUT_SECONDS, isolation_level=None,
        check_same_thread=False,
    )
    try:
        for statement in _SCHEMA:
            connection.execute(statement)
        page_size = integer(connection, "PRAGMA page_size")
    except BaseException:
        connection.close()
        raise
    return connection, page_size


@contextmanager
def write(connection: sqlite3.Connection) -> Iterator[None]:
    """One short write transaction. IMMEDIATE takes the write lock at the
    start (waiting up to the timeout for another process), so that two
    writers never both hold a read lock and then fail to upgrade it."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
        connection.execute("COMMIT")
    except BaseException:
        # The error that stopped the transaction is the one to report, not
        # a second one from undoing it (the journal undoes it anyway).
        if connection.in_transaction:
            with suppress(sqlite3.Error):
                connection.rollback()
        raise


def used_bytes(connection: sqlite3.Connection, page_size: int) -> int:
    """What the file will measure after this transaction commits: its
    pages less the free ones, which auto_vacuum = FULL cuts off at commit.
    The journal is gone by then (deleted at commit). While the transaction
    runs the files may pass the cap by the new text (at most a quarter of
    it) and the journal; after it, they never do."""
    pages = integer(connection, "PRAGMA page_count")
    free = integer(connection, "PRAGMA freelist_count")
    return (pages - free) * page_size


def disk_bytes(path: Path) -> int:
    """The size of the database on disk: the file and its journal (or
    write-ahead log) if any; 0 before it exists (OSError when a size cannot
    be read)."""
    total = 0
    for name in ("", *_SIDE_FILES):
        try:
            total += os.path.getsize(f"{path}{name}")
        except FileNotFoundError:
            continue
    return total


def integer(connection: sqlite3.Connection, pragma: str) -> int:
    row: object = connection.execute(pragma).fetchone()
    if not isinstance(row, tuple) or not row or not isinstance(row[0], int):
        raise sqlite3.DatabaseError(f"{pragma} gave {row!r}")
    value: int = row[0]
    return value
