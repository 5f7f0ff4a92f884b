"""The store of cut MCP strings in Redis (``recall/redis_store.py``), against
a real redis-server on 127.0.0.1: the same bounds as the SQLite store in
Redis's terms (a TTL of the age limit, set again at each put; the oldest
go first past the byte cap, the one just put last), the same compressed
bytes, a text got back exactly (lone surrogates included), shared by two
stores (two proxies) and by nobody under another key prefix; a server out
of reach is a StoreError naming it, and it is reached again once back."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator

import pytest

from obsmask_core.recall.redis_store import ENTRY_OVERHEAD, RedisRecallStore
from obsmask_core.recall.store import RecallStorage, RecallStore, StoredText, StoreError
from obsmask_core.shared.recall_text import store_id
from support.redis_server import RedisServer, free_port, needs_redis, running_redis

pytestmark = needs_redis

KIB = 1024
MAX_AGE = 100.0


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def noise(seed: int, size: int) -> str:
    """A text that does not compress (about ``size`` bytes compressed)."""
    return random.Random(seed).randbytes(size).hex()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as running:
        yield running


@pytest.fixture
def prefix() -> str:
    """Keys of a test's own: the tests share one server."""
    return f"test-{uuid.uuid4().hex[:12]}:"


def store_on(server: RedisServer, prefix: str, clock: Clock | None = None, *,
             max_bytes: int = 64 * 1024 * KIB, max_age: float = MAX_AGE) -> RedisRecallStore:
    return RedisRecallStore(server.url, key_prefix=prefix, max_bytes=max_bytes,
                            max_age_seconds=max_age, clock=clock or Clock())


def present(store: RecallStorage, texts: list[str]) -> list[bool]:
    return [store.get(store_id(text)) is not None for text in texts]


def test_both_stores_are_the_one_interface_the_proxy_uses(server, prefix, tmp_path):
    stores: list[RecallStorage] = [
        store_on(server, prefix),
        RecallStore(tmp_path / "r.sqlite3", max_bytes=1 << 20, max_age_seconds=MAX_AGE),
    ]
    assert [s.where for s in stores] == [server.url, str(tmp_path / "r.sqlite3")]


@pytest.mark.parametrize("text", [
    "",
    "plain ASCII\nwith lines\r\n",
    "accents é à ü, 漢字, Ελληνικά, emoji 🙂👩‍👩‍👧",
    "\ud800",
    "lone low \udfff in the middle",
    "\ud800\udc00 a pair written as two code points",
    "\x00 NUL and \x7f DEL",
    noise(1, 256 * KIB) + "é🙂\ud800" + "x" * (512 * KIB),
], ids=["empty", "ascii", "non-ascii", "lone-surrogate", "lone-low", "surrogate-pair",
        "control", "one-megabyte"])
def test_a_text_put_is_got_back_identical_as_from_the_sqlite_store(server, prefix, tmp_path,
                                                                   text):
    """Whatever str is put (lone surrogates included) is got back equal,
    from Redis as from SQLite, and Redis holds the very bytes SQLite does
    (UTF-8 with surrogatepass, zlib level 1)."""
    clock = Clock()
    store = store_on(server, prefix, clock)
    sqlite = RecallStore(tmp_path / "r.sqlite3", max_bytes=64 << 20, max_age_seconds=MAX_AGE,
                         clock=clock)
    assert store.put(store_id(text), text) is True
    assert sqlite.put(store_id(text), text) is True
    assert store.get(store_id(text)) == StoredText(text, clock.now) == sqlite.get(store_id(text))
    in_redis = server.client().hget(f"{prefix}recall:{store_id(text)}", "d")
    with sqlite._lock:
        (in_sqlite,) = sqlite._connect().execute("SELECT data FROM recall").fetchone()
    assert in_redis == in_sqlite
    sqlite.close()


def test_a_long_text_is_kept_compressed(server, prefix):
    text = "".join(f"[build] step {n:05d}: compiled unit_{n % 97:02d}.o\n" for n in range(20_000))
    store = store_on(server, prefix)
    assert store.put(store_id(text), text)
    kept = server.client().hget(f"{prefix}recall:{store_id(text)}", "d")
    assert kept is not None and len(kept) < len(text) / 5
    assert store.used_bytes() == len(kept) + ENTRY_OVERHEAD


def test_get_of_an_unknown_id_is_none(server, prefix):
    store = store_on(server, prefix)
    assert store.get(store_id("never put")) is None
    store.put(store_id("other"), "other")
    assert store.get(store_id("never put")) is None


def test_the_entry_lives_in_redis_with_a_ttl_of_the_age_limit_set_again_at_each_put(
        server, prefix):
    """A put gives the key a TTL of max_age_seconds; a put of the same id
    later (the same string cut again) sets it back to the full age."""
    store = store_on(server, prefix, max_age=7 * 86_400.0)
    client = server.client()
    key = f"{prefix}recall:{store_id('t')}"
    store.put(store_id("t"), "t")
    assert 7 * 86_400_000 - 5_000 < client.pttl(key) <= 7 * 86_400_000
    client.pexpire(key, 60_000)
    store.put(store_id("t"), "t")
    assert client.pttl(key) > 7 * 86_400_000 - 5_000


def test_an_entry_past_its_ttl_is_gone_from_redis_itself(server, prefix):
    """With a real clock and an age of a fraction of a second, Redis drops
    the key by itself: the get finds nothing, the next put takes it off the
    books (the byte total goes down)."""
    store = RedisRecallStore(server.url, key_prefix=prefix, max_bytes=1 << 20,
                             max_age_seconds=0.3)
    store.put(store_id("short-lived"), "short-lived")
    assert store.get(store_id("short-lived")) is not None
    time.sleep(0.5)
    assert server.client().exists(f"{prefix}recall:{store_id('short-lived')}") == 0
    assert store.get(store_id("short-lived")) is None
    store.put(store_id("next"), "next")
    assert server.client().zrange(f"{prefix}recall:by-age", 0, -1) == [
        store_id("next").encode()]
    assert store.used_bytes() == int(server.client().hget(f"{prefix}recall:sizes",
                                                          store_id("next")))


def test_an_entry_older_than_max_age_by_its_stored_time_is_not_returned(server, prefix):
    """Another proxy's clock, or a TTL not yet run out: the stored time
    decides too, as in the SQLite store."""
    clock = Clock()
    store = store_on(server, prefix, clock)
    store.put(store_id("a"), "a")
    clock.now += MAX_AGE
    assert store.get(store_id("a")) == StoredText("a", clock.now - MAX_AGE)
    clock.now += 1
    assert store.get(store_id("a")) is None


def test_the_oldest_entries_go_first_when_the_byte_cap_is_reached(server, prefix):
    clock = Clock()
    store = store_on(server, prefix, clock, max_bytes=100 * KIB)
    texts = [noise(n, 20 * KIB) for n in range(8)]
    for text in texts:
        clock.now += 1
        assert store.put(store_id(text), text)
    kept = present(store, texts)
    # Four 20 KiB texts (and their overheads) fit in 100 KiB, five do not.
    assert kept == [False] * 4 + [True] * 4
    assert store.used_bytes() <= 100 * KIB


def test_putting_again_moves_an_entry_to_the_back_of_the_eviction_line(server, prefix):
    clock = Clock()
    store = store_on(server, prefix, clock, max_bytes=100 * KIB)
    texts = [noise(n, 20 * KIB) for n in range(4)]
    for text in texts:
        clock.now += 1
        store.put(store_id(text), text)
    clock.now += 1
    store.put(store_id(texts[0]), texts[0])  # cut again: the newest now
    for n in (10, 11):
        clock.now += 1
        extra = noise(n, 20 * KIB)
        store.put(store_id(extra), extra)
    assert present(store, texts) == [True, False, False, True]


def test_the_byte_total_stays_under_the_cap_after_hundreds_of_puts(server, prefix):
    store = store_on(server, prefix, max_bytes=200 * KIB)
    client = server.client()
    for n in range(300):
        text = noise(1000 + n, random.Random(n).randrange(1, 30) * KIB)
        store.put(store_id(text), text)
        assert store.used_bytes() <= 200 * KIB
    sizes = {k: int(v) for k, v in client.hgetall(f"{prefix}recall:sizes").items()}
    assert store.used_bytes() == sum(sizes.values())
    assert set(sizes) == set(client.zrange(f"{prefix}recall:by-age", 0, -1))
    data = sum(len(client.hget(f"{prefix}recall:{k.decode()}", "d")) for k in sizes)
    assert data + ENTRY_OVERHEAD * len(sizes) == store.used_bytes()


def test_a_text_too_large_for_the_cap_is_not_kept_and_evicts_nothing(server, prefix):
    store = store_on(server, prefix, max_bytes=100 * KIB)
    small = noise(1, 10 * KIB)
    store.put(store_id(small), small)
    big = noise(2, 30 * KIB)  # over a quarter of the cap
    assert store.put(store_id(big), big) is False
    assert present(store, [small, big]) == [True, False]


def test_two_stores_on_one_server_see_each_others_puts_and_another_prefix_sees_none(
        server, prefix):
    """Two proxies on one server and prefix share every string; a
    deployment with another prefix shares none."""
    first, second = store_on(server, prefix), store_on(server, prefix)
    other = store_on(server, f"other-{prefix}")
    first.put(store_id("from the first"), "from the first")
    assert second.get(store_id("from the first")) is not None
    assert other.get(store_id("from the first")) is None


def test_a_server_out_of_reach_is_a_store_error_naming_it_and_never_a_long_wait(tmp_path):
    store = RedisRecallStore(f"redis://127.0.0.1:{free_port()}/0", key_prefix="x:",
                             max_bytes=1 << 20, max_age_seconds=MAX_AGE)
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"recall store redis://127\.0\.0\.1:\d+/0: .*"):
        store.put(store_id("a"), "a")
    with pytest.raises(StoreError, match="recall store redis://"):
        store.get(store_id("a"))
    assert time.monotonic() - started < 2.0


def test_a_store_reaches_the_server_again_once_it_is_back(tmp_path):
    """Stopped between two puts, the server makes the next calls fail; once
    it runs again on the same port (same files), the same store object
    works again without being told, and what it held is there."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        store = store_on(server, "back:")
        assert store.put(store_id("before"), "before")
        server.stop()
        with pytest.raises(StoreError):
            store.put(store_id("during"), "during")
        with pytest.raises(StoreError):
            store.get(store_id("before"))
        server.start()
        assert store.get(store_id("before")) is not None
        assert store.put(store_id("after"), "after")
        assert store.get(store_id("after")) is not None
    finally:
        server.stop()


def test_the_password_of_the_url_is_never_in_a_message():
    store = RedisRecallStore(f"redis://user:s3cret@127.0.0.1:{free_port()}/0",
                             key_prefix="x:", max_bytes=1 << 20, max_age_seconds=MAX_AGE)
    with pytest.raises(StoreError) as raised:
        store.get(store_id("a"))
    assert "s3cret" not in str(raised.value) and "s3cret" not in store.where
