"""The table of when conversations were last seen, in Redis
(``conversation/billing/last_seen_redis.py``), against a real redis-server: two
proxies sharing it see one conversation's pauses as one (measured from its
latest request through either), the same cold ends, also after a restart;
it answers as the in-memory table does; it is bounded like it; and a
server out of reach never holds a request up: the proxy's own table
answers, the server is not asked again for a while, and once it is back
a conversation kept moving meanwhile is not taken for paused."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from obsmask_core.conversation.billing.last_seen import LastSeen, LastSeenTable, Visit
from obsmask_core.conversation.billing.last_seen_redis import RETRY_SECONDS, RedisLastSeen
from support.redis_server import RedisServer, free_port, needs_redis, running_redis

pytestmark = needs_redis

FIVE_MINUTES = 300


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as running:
        yield running


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex[:12]}:"


class Monotonic:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_pause_is_measured_from_the_latest_request_through_either_proxy(server, prefix):
    """A at 0 s, B at 200 s, A at 400 s: four minutes apart through the
    pair, so the cache is warm; A's own table alone would take it for cold."""
    a, b = (RedisLastSeen(server.url, key_prefix=prefix) for _ in range(2))
    alone = LastSeen()
    assert a.visit("c-1", 0.0, 3, FIVE_MINUTES) == frozenset()
    alone.visit("c-1", 0.0, 3, FIVE_MINUTES)
    assert b.visit("c-1", 200.0, 5, FIVE_MINUTES) == frozenset()
    assert a.visit("c-1", 400.0, 7, FIVE_MINUTES) == frozenset()
    assert alone.visit("c-1", 400.0, 7, FIVE_MINUTES) == {7}


def test_a_cold_end_found_by_one_proxy_is_every_proxys_and_survives_a_restart(server, prefix):
    a, b = (RedisLastSeen(server.url, key_prefix=prefix) for _ in range(2))
    a.visit("c-1", 0.0, 3, FIVE_MINUTES)
    assert b.visit("c-1", 1000.0, 9, FIVE_MINUTES) == {9}
    assert a.cold_ends("c-1") == {9}
    assert a.visit("c-1", 1010.0, 11, FIVE_MINUTES) == {9}
    restarted = RedisLastSeen(server.url, key_prefix=prefix)
    assert restarted.cold_ends("c-1") == {9}
    assert restarted.visit("c-1", 1020.0, 13, FIVE_MINUTES) == {9}


def test_another_key_prefix_shares_nothing(server, prefix):
    a = RedisLastSeen(server.url, key_prefix=prefix)
    other = RedisLastSeen(server.url, key_prefix=f"other-{prefix}")
    a.visit("c-1", 0.0, 3, FIVE_MINUTES)
    a.visit("c-1", 1000.0, 9, FIVE_MINUTES)
    assert other.cold_ends("c-1") == frozenset()
    assert other.visit("c-1", 1001.0, 11, FIVE_MINUTES) == frozenset()


def test_the_shared_table_answers_every_visit_as_the_table_in_memory(server, prefix):
    """The same visits (pauses around the lifetime, a retry, a request
    planned out of order, two conversations) give the same cold ends."""
    visits = [("c-a", 0.0, 3, FIVE_MINUTES), ("c-b", 0.0, 5, FIVE_MINUTES),
              ("c-a", 300.0, 5, FIVE_MINUTES), ("c-a", 601.0, 7, FIVE_MINUTES),
              ("c-a", 602.0, 7, FIVE_MINUTES), ("c-a", 550.0, 6, FIVE_MINUTES),
              ("c-a", 2000.0, 11, 3600), ("c-a", 6000.0, 13, 3600),
              ("c-b", 60.0, 7, FIVE_MINUTES), ("c-b", 10_000.0, 9, FIVE_MINUTES)]
    tables: list[LastSeenTable] = [RedisLastSeen(server.url, key_prefix=prefix), LastSeen()]
    answers = [[table.visit(*visit) for visit in visits] for table in tables]
    assert answers[0] == answers[1]
    assert answers[0][3] == {7} and answers[0][-1] == {9}
    assert Visit(tables[0], 20_000.0).of("c-b", 11, FIVE_MINUTES) == {9, 11}


def test_the_least_recently_seen_conversations_go_past_the_bound(server, prefix):
    table = RedisLastSeen(server.url, key_prefix=prefix, conversations=3, cold_ends=2)
    for n, name in enumerate(["c-1", "c-2", "c-3"]):
        table.visit(name, float(n), 3, FIVE_MINUTES)
        table.visit(name, 1000.0 + n, 5, FIVE_MINUTES)
    table.visit("c-1", 1010.0, 6, FIVE_MINUTES)  # c-1 seen again: c-2 is the oldest
    table.visit("c-4", 1020.0, 3, FIVE_MINUTES)
    client = server.client()
    assert sorted(k.decode() for k in client.zrange(f"{prefix}seen:by-time", 0, -1)) == [
        f"{prefix}seen:c-{n}" for n in (1, 3, 4)]
    assert client.exists(f"{prefix}seen:c-2") == 0
    # The cold ends kept per conversation are bounded too, the oldest go.
    for n in range(4):
        table.visit("c-1", 10_000.0 * (n + 2), 10 + n, FIVE_MINUTES)
    assert table.cold_ends("c-1") == {12, 13}


def test_each_conversation_has_a_ttl_set_again_at_each_visit(server, prefix):
    table = RedisLastSeen(server.url, key_prefix=prefix)
    table.visit("c-1", time.time(), 3, FIVE_MINUTES)
    client = server.client()
    client.expire(f"{prefix}seen:c-1", 60)
    table.visit("c-1", time.time(), 5, FIVE_MINUTES)
    assert client.ttl(f"{prefix}seen:c-1") > 29 * 86_400


def test_a_server_out_of_reach_never_holds_a_visit_up_and_is_asked_again_later(tmp_path):
    failures: list[BaseException] = []
    clock = Monotonic()
    server = RedisServer(tmp_path / "redis", free_port())
    table = RedisLastSeen(server.url, key_prefix="t:", failed=failures.append,
                          monotonic=clock)
    started = time.monotonic()
    # Down: the proxy's own table answers, as it would alone.
    assert table.visit("c-1", 0.0, 3, FIVE_MINUTES) == frozenset()
    assert table.visit("c-1", 1000.0, 5, FIVE_MINUTES) == {5}
    assert time.monotonic() - started < 1.0
    assert len(failures) == 1  # not asked again within RETRY_SECONDS
    server.start()
    try:
        assert table.visit("c-1", 1100.0, 7, FIVE_MINUTES) == {5}  # still its own
        clock.now += RETRY_SECONDS
        # Back: the server had never seen c-1, but this proxy saw it 200 s
        # ago, so it is not taken for paused; and from now on it is shared.
        assert table.visit("c-1", 1300.0, 9, FIVE_MINUTES) == {5}
        other = RedisLastSeen(server.url, key_prefix="t:")
        assert other.visit("c-1", 1400.0, 11, FIVE_MINUTES) == {5}
        assert len(failures) == 1
    finally:
        server.stop()
