"""The store of cut MCP strings (``recall/store.py``): a text put is got back
as it was, after a restart and from another process too; an entry goes when
it is too old or, oldest first, when the file would outgrow its cap; the
file on disk really stays under the cap; failures are StoreErrors."""

from __future__ import annotations

import os
import random
import sqlite3
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obsmask_core.recall.store import RecallStore, StoredText, StoreError
from obsmask_core.shared.recall_text import store_id

MAX_AGE = 100.0
KIB = 1024


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def noise(seed: int, size: int) -> str:
    """A text that does not compress (random bytes, hex: about size bytes
    once compressed)."""
    return random.Random(seed).randbytes(size).hex()


def store_at(path: Path, clock: Clock, max_bytes: int = 64 * 1024 * KIB,
             max_age: float = MAX_AGE) -> RecallStore:
    return RecallStore(path, max_bytes=max_bytes, max_age_seconds=max_age, clock=clock)


def files_size(path: Path) -> int:
    """The database's size on disk, measured here apart from the store."""
    return sum(os.path.getsize(f"{path}{side}") for side in ("", "-journal", "-wal")
               if os.path.exists(f"{path}{side}"))


def present(store: RecallStore, texts: list[str]) -> list[bool]:
    return [store.get(store_id(text)) is not None for text in texts]


@pytest.mark.parametrize("text", [
    "",
    "plain ASCII\nwith lines\r\n",
    "accents é à ü, 漢字, Ελληνικά",
    "emoji 🙂👩‍👩‍👧 and a flag 🇫🇷",
    "\ud800",
    "lone low \udfff in the middle",
    "\ud800\udc00 a pair written as two code points",
    "\x00 NUL and \x7f DEL",
    noise(1, 256 * KIB) + "é🙂\ud800" + "x" * (512 * KIB),  # over 1 MB
], ids=["empty", "ascii", "non-ascii", "emoji", "lone-surrogate", "lone-low",
        "surrogate-pair", "control", "one-megabyte"])
def test_a_text_put_is_got_back_identical(tmp_path, text):
    """Whatever str is put (any code point, lone surrogates included, empty
    or over a megabyte) is got back equal, character for character."""
    clock = Clock()
    store = store_at(tmp_path / "recall.sqlite3", clock)
    assert store.put(store_id(text), text) is True
    assert store.get(store_id(text)) == StoredText(text, clock.now)


def test_get_of_an_unknown_id_is_none(tmp_path):
    """An id nothing was put under gives None, in an empty store and in one
    holding other texts."""
    store = store_at(tmp_path / "recall.sqlite3", Clock())
    assert store.get("cut-0123456789abcdef") is None
    store.put(store_id("kept"), "kept")
    assert store.get("cut-0123456789abcdef") is None
    assert store.get(store_id("kept")) is not None


def test_nothing_touches_the_disk_before_the_first_use(tmp_path):
    """Building a store creates no file and no directory; its size on disk is
    0 until the first use, which creates the missing directories."""
    path = tmp_path / "deep" / "er" / "recall.sqlite3"
    store = store_at(path, Clock())
    assert not (tmp_path / "deep").exists()
    assert store.disk_bytes() == 0
    store.put(store_id("text"), "text")
    assert path.is_file()
    assert store.disk_bytes() == files_size(path) > 0


def test_a_text_survives_closing_and_reopening_the_store(tmp_path):
    """A new store on the same file (a restart of the proxy) gets back what
    the closed one put, with its age."""
    path = tmp_path / "recall.sqlite3"
    clock = Clock()
    first = store_at(path, clock)
    first.put(store_id("before the restart"), "before the restart")
    first.close()
    clock.now += 10
    second = store_at(path, clock)
    assert second.get(store_id("before the restart")) == StoredText(
        "before the restart", clock.now - 10)


def test_two_stores_on_the_same_file_see_each_others_puts(tmp_path):
    """Two stores open on one file (two proxies sharing a data directory) each
    get what the other put, and a refresh by one is seen by the other."""
    path = tmp_path / "recall.sqlite3"
    clock = Clock()
    one, other = store_at(path, clock), store_at(path, clock)
    one.put(store_id("from one"), "from one")
    other.put(store_id("from other"), "from other")
    assert other.get(store_id("from one")) == StoredText("from one", clock.now)
    assert one.get(store_id("from other")) == StoredText("from other", clock.now)
    clock.now += 5
    other.put(store_id("from one"), "from one")
    assert one.get(store_id("from one")) == StoredText("from one", clock.now)


def test_puts_from_several_threads_at_once_are_all_kept(tmp_path):
    """One store used by several threads at once keeps every text."""
    store = store_at(tmp_path / "recall.sqlite3", Clock())
    texts = [f"thread {n} text {i}" for n in range(4) for i in range(25)]

    def put_all(part: list[str]) -> None:
        for text in part:
            store.put(store_id(text), text)

    threads = [threading.Thread(target=put_all, args=(texts[n::4],)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(present(store, texts))


def test_an_entry_older_than_max_age_is_not_returned_and_the_next_put_deletes_it(tmp_path):
    """Past max_age an entry is no longer returned, even while it is still in
    the file; the next put deletes it (a store with a longer max_age on the
    same file saw it before that put, and no longer does after)."""
    path = tmp_path / "recall.sqlite3"
    clock = Clock()
    store = store_at(path, clock)
    lenient = store_at(path, clock, max_age=1_000_000.0)
    store.put(store_id("old"), "old")
    clock.now += MAX_AGE
    assert store.get(store_id("old")) is not None  # exactly max_age old: still kept
    clock.now += 0.5
    assert store.get(store_id("old")) is None
    assert lenient.get(store_id("old")) is not None  # not deleted yet
    store.put(store_id("new"), "new")
    assert lenient.get(store_id("old")) is None
    assert lenient.get(store_id("new")) is not None


def test_putting_again_refreshes_the_age_of_an_entry(tmp_path):
    """A text put again counts its age from the last put: it is still there
    when its first put is older than max_age, with the new time."""
    clock = Clock()
    store = store_at(tmp_path / "recall.sqlite3", clock)
    store.put(store_id("again"), "again")
    clock.now += 80
    assert store.put(store_id("again"), "again") is True
    refreshed_at = clock.now
    clock.now += 50
    assert store.get(store_id("again")) == StoredText("again", refreshed_at)
    clock.now += 51
    assert store.get(store_id("again")) is None


def test_the_oldest_entries_go_first_when_the_cap_is_reached(tmp_path):
    """Filling past the cap drops entries oldest first: after every put the
    entries still there are the newest ones, the one just put among them,
    and the oldest are gone."""
    clock = Clock()
    store = store_at(tmp_path / "recall.sqlite3", clock, max_bytes=96 * KIB)
    texts = [noise(seed, 4000) for seed in range(40)]
    for count, text in enumerate(texts, start=1):
        clock.now += 1
        assert store.put(store_id(text), text) is True
        there = present(store, texts[:count])
        kept = there.count(True)
        assert there == [False] * (count - kept) + [True] * kept
    assert there[0] is False
    assert there[-5:] == [True] * 5


def test_putting_again_moves_an_entry_to_the_back_of_the_eviction_line(tmp_path):
    """A text put again is the newest: the next entries to go are the others,
    oldest first, and it stays."""
    clock = Clock()
    store = store_at(tmp_path / "recall.sqlite3", clock, max_bytes=96 * KIB)
    texts = [noise(seed, 4000) for seed in range(40)]
    kept: list[str] = []
    for text in texts:
        clock.now += 1
        store.put(store_id(text), text)
        if store.get(store_id(texts[0])) is None:
            break
        kept.append(text)
    # The store is full, and the first text went first. Put the second
    # again (the oldest left): the third goes in its place.
    second, third = kept[1], kept[2]
    clock.now += 1
    store.put(store_id(second), second)
    clock.now += 1
    store.put(store_id("x" * 10), "x" * 10)
    filler = noise(1000, 4000)
    clock.now += 1
    store.put(store_id(filler), filler)
    assert store.get(store_id(third)) is None
    assert store.get(store_id(second)) is not None


def test_the_size_on_disk_stays_under_the_cap_after_hundreds_of_puts(tmp_path):
    """However many incompressible texts are put, the file and its journal
    measure at most max_bytes on disk after every put, while the store stays
    in use (more than half full)."""
    cap = 128 * KIB
    path = tmp_path / "recall.sqlite3"
    clock = Clock()
    store = store_at(path, clock, max_bytes=cap)
    sizes = random.Random(7)
    for seed in range(300):
        clock.now += 0.25
        text = noise(seed, sizes.randrange(100, 12_000))
        assert store.put(store_id(text), text) is True
        assert files_size(path) <= cap
        assert store.disk_bytes() == files_size(path)
    assert files_size(path) > cap // 2


def test_a_text_too_large_for_the_cap_is_not_kept_and_evicts_nothing(tmp_path):
    """A text whose compressed size alone is over a quarter of the cap is not
    kept (put says False), and the texts already there all stay."""
    clock = Clock()
    store = store_at(tmp_path / "recall.sqlite3", clock, max_bytes=128 * KIB)
    small = [noise(seed, 2000) for seed in range(20)]
    for text in small:
        clock.now += 1
        assert store.put(store_id(text), text) is True
    before = present(store, small)
    size_before = store.disk_bytes()
    huge = noise(99, 33 * KIB)  # incompressible: over 128 KiB // 4 compressed
    clock.now += 1
    assert store.put(store_id(huge), huge) is False
    assert store.get(store_id(huge)) is None
    assert present(store, small) == before
    assert all(before)
    assert store.disk_bytes() == size_before
    # A large text that compresses well is kept: the bound is its compressed size.
    compressible = "y" * (1024 * KIB)
    assert store.put(store_id(compressible), compressible) is True


def test_an_unwritable_location_raises_store_error_naming_the_file(tmp_path):
    """A store whose directory cannot be made (a regular file is in the way)
    raises StoreError, naming the file in one line, on put and on get; never
    an sqlite3 or OS error."""
    (tmp_path / "a-file").write_text("not a directory")
    path = tmp_path / "a-file" / "recall.sqlite3"
    store = store_at(path, Clock())
    for use in (lambda: store.put(store_id("text"), "text"), lambda: store.get("cut-00")):
        with pytest.raises(StoreError) as raised:
            use()
        assert str(path) in str(raised.value)
        assert "\n" not in str(raised.value)
        assert not isinstance(raised.value, (sqlite3.Error, OSError))


def test_a_corrupt_file_raises_store_error_naming_the_file(tmp_path):
    """A file that is not a database raises StoreError naming it, on put and
    on get."""
    path = tmp_path / "recall.sqlite3"
    path.write_bytes(b"this is not an SQLite database, " * 256)
    store = store_at(path, Clock())
    for use in (lambda: store.put(store_id("text"), "text"), lambda: store.get("cut-00")):
        with pytest.raises(StoreError) as raised:
            use()
        assert str(path) in str(raised.value)


# The model-based property: small cap, a few texts (two never fit), a clock
# moved by whole seconds so that ages compare exactly.
CAP = 64 * KIB
POOL = [noise(seed, size) for seed, size in enumerate([0, 30, 2000, 4000, 6000, 8000, 40_000])]
POOL += ["é🙂\ud800 and a lone surrogate", "z" * 200_000, noise(50, 60_000)]
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, len(POOL) - 1)),
        st.tuples(st.just("tick"), st.integers(0, 70)),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(OPERATIONS)
def test_the_store_never_gives_a_wrong_text_and_keeps_the_newest(operations):
    """Against a model (each text's last put time): a get gives either None or
    the very text put under that id, with its last put time; never an
    expired one; the entries kept are the newest ones (none is missing while
    an older one is there); the last text kept is there until it expires; a
    put refused (a text too large) changes nothing, and a text well under a
    quarter of the cap is never refused."""
    clock = Clock()
    stamps: dict[int, float] = {}
    last_kept: int | None = None
    with tempfile.TemporaryDirectory() as directory:
        store = store_at(Path(directory) / "recall.sqlite3", clock, max_bytes=CAP)
        seen = [False] * len(POOL)
        for action, value in operations:
            if action == "tick":
                clock.now += value
            else:
                text = POOL[value]
                kept = store.put(store_id(text), text)
                if kept:
                    stamps[value] = clock.now
                    last_kept = value
                else:
                    assert len(text.encode("utf-8", "surrogatepass")) > CAP // 8
                    assert present(store, POOL) == seen
            oldest_kept = clock.now - MAX_AGE
            seen = []
            for index, text in enumerate(POOL):
                got = store.get(store_id(text))
                seen.append(got is not None)
                if index not in stamps or stamps[index] < oldest_kept:
                    assert got is None
                elif got is not None:
                    assert got == StoredText(text, stamps[index])
            live = [index for index in stamps if stamps[index] >= oldest_kept]
            for older in live:
                for newer in live:
                    if seen[older] and stamps[newer] > stamps[older]:
                        assert seen[newer]
            if last_kept is not None and stamps[last_kept] >= oldest_kept:
                assert seen[last_kept]
            assert store.disk_bytes() <= CAP
        store.close()
