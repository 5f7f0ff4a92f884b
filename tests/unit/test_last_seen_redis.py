"""The table of when conversations were last seen, in Redis
(``conversation/billing/last_seen_redis.py``), against a real redis-server: two
proxies sharing it see one conversation's pauses as one (measured from its
latest request through either), the same cold ends and brake, also after a
restart; each visit moves the conversation's hash from its previous
request's key to its own; it answers as the in-memory table does; it is
bounded like it; and a server out of reach never holds a request up: the
proxy's own table answers (where a request whose previous one another
proxy served is a new conversation, never cold), the server is not asked
again for a while, and once it is back a conversation kept moving
meanwhile is not taken for paused."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from obsmask_core.conversation.billing.cache_lifetime import FIVE_MINUTES, NEVER_COLD
from obsmask_core.conversation.billing.history_key import HistoryKey
from obsmask_core.conversation.billing.last_seen import (
    LastSeen,
    LastSeenTable,
    Sighting,
    Visit,
)
from obsmask_core.conversation.billing.last_seen_redis import RETRY_SECONDS, RedisLastSeen
from support.history_keys import HistoryKeys
from support.redis_server import RedisServer, free_port, needs_redis, running_redis

pytestmark = needs_redis

WARM = Sighting()


def cold(*ends: int) -> Sighting:
    return Sighting(frozenset(ends))


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


def held(server: RedisServer, prefix: str) -> dict[str, frozenset[int]]:
    """The conversations the server holds under ``prefix``, by their latest
    key (a request's own history; the entries a later request went on from
    are marked ``moved``), with their cold ends; read without a visit."""
    client = server.client()
    try:
        return {
            key.decode().removeprefix(f"{prefix}seen:"): frozenset(
                int(end) for end in (client.hget(key, "cold") or b"").split(b",") if end)
            for key in client.zrange(f"{prefix}seen:by-time", 0, -1)
            if not client.hexists(key, "moved")}
    finally:
        client.close()


def test_a_pause_is_measured_from_the_latest_request_through_either_proxy(server, prefix):
    """A at 0 s, the same request sent again through B at 200 s, the next
    one through A at 400 s: four minutes apart through the pair, so the
    cache is warm; A's own table alone would take it for cold."""
    a, b = (RedisLastSeen(server.url, key_prefix=prefix) for _ in range(2))
    keys, alone = HistoryKeys(), LastSeen()
    assert a.visit(keys.of("c", 3), 0.0, 3, FIVE_MINUTES) == WARM
    alone.visit(keys.of("c", 3), 0.0, 3, FIVE_MINUTES)
    assert b.visit(keys.of("c", 3), 200.0, 3, FIVE_MINUTES) == WARM
    assert a.visit(keys.of("c", 5), 400.0, 5, FIVE_MINUTES) == WARM
    assert alone.visit(keys.of("c", 5), 400.0, 5, FIVE_MINUTES) == cold(5)


def test_proxies_serving_alternate_requests_never_find_the_conversation_cold(server, prefix):
    """Two proxies behind a load balancer take turns, four minutes apart:
    each proxy sees the conversation every eight minutes, past the
    lifetime, but through the shared table the pause is always four."""
    proxies = [RedisLastSeen(server.url, key_prefix=prefix) for _ in range(2)]
    keys = HistoryKeys()
    found = [proxies[number % 2].visit(keys.of("c", end), number * 240.0, end, FIVE_MINUTES)
             for number, end in enumerate(range(3, 23, 2))]
    assert found == [WARM] * 10
    assert list(held(server, prefix)) == [keys.latest("c").own]
    # A real pause is seen, also by the proxy that did not serve the
    # request before it.
    assert proxies[0].visit(keys.of("c", 23), 10 * 240.0 + 400.0, 23, FIVE_MINUTES) == cold(23)


def test_with_the_server_out_of_reach_alternate_requests_are_never_taken_for_cold(tmp_path):
    """Each proxy's own table never saw the request just before the one it
    serves (the other proxy did): to it, that is a new conversation, so
    the eight minutes since its own previous request are not a pause."""
    down = RedisServer(tmp_path / "redis", free_port())
    proxies = [RedisLastSeen(down.url, key_prefix="t:") for _ in range(2)]
    keys = HistoryKeys()
    found = [proxies[number % 2].visit(keys.of("c", end), number * 240.0, end, FIVE_MINUTES)
             for number, end in enumerate(range(3, 23, 2))]
    assert found == [WARM] * 10
    # A real pause, through one proxy, is still seen.
    assert proxies[1].visit(keys.of("c", 23), 10 * 240.0 + 400.0, 23, FIVE_MINUTES) == cold(23)


def test_a_cold_end_found_by_one_proxy_is_every_proxys_and_survives_a_restart(server, prefix):
    a, b = (RedisLastSeen(server.url, key_prefix=prefix) for _ in range(2))
    keys = HistoryKeys()
    a.visit(keys.of("c", 3), 0.0, 3, FIVE_MINUTES)
    assert b.visit(keys.of("c", 9), 1000.0, 9, FIVE_MINUTES) == cold(9)
    assert held(server, prefix) == {keys.latest("c").own: {9}}
    assert a.visit(keys.of("c", 11), 1010.0, 11, FIVE_MINUTES) == cold(9)
    restarted = RedisLastSeen(server.url, key_prefix=prefix)
    assert restarted.visit(keys.of("c", 13), 1020.0, 13, FIVE_MINUTES) == cold(9)


def test_a_restarted_proxy_finds_the_conversations_cold_ends_and_brake(server, prefix):
    keys = HistoryKeys()
    before = RedisLastSeen(server.url, key_prefix=prefix)
    before.visit(keys.of("c", 3), 0.0, 3, FIVE_MINUTES)
    assert before.visit(keys.of("c", 5), 1000.0, 5, FIVE_MINUTES) == cold(5)
    assert before.add_surprise(keys.latest("c").own, 1001.0, 80.0, 50.0, 5).tripped
    before.close()
    restarted = RedisLastSeen(server.url, key_prefix=prefix)
    assert len(restarted.local) == 0
    assert restarted.visit(keys.of("c", 7), 1100.0, 7, FIVE_MINUTES) == Sighting(
        frozenset({5}), 6)
    # And the brake's sum goes on from the server's.
    assert restarted.add_surprise(keys.latest("c").own, 1101.0, 1.0, 50.0, 7).surprise == 81.0


def test_a_visit_carries_the_conversations_hash_on_to_its_own_history(server, prefix):
    """A conversation goes on under its latest request's history, with
    everything it held (time, cold ends, brake); its previous request's
    hash is marked as gone on from."""
    table, keys = RedisLastSeen(server.url, key_prefix=prefix), HistoryKeys()
    client = server.client()
    for end, now in [(3, 0.0), (5, 200.0), (7, 400.0), (9, 1000.0), (11, 1200.0),
                     (13, 2000.0)]:
        key = keys.of("c", end)
        table.visit(key, now, end, FIVE_MINUTES)
        if end == 3:
            table.add_surprise(key.own, 1.0, 80.0, 50.0, 3)
        assert list(held(server, prefix)) == [key.own]
        if key.previous is not None:
            assert client.hget(f"{prefix}seen:{key.previous}", "moved") == b"1"
    latest = f"{prefix}seen:{keys.latest('c').own}"
    assert held(server, prefix) == {keys.latest("c").own: {9, 13}}
    assert client.hmget(latest, "last", "surprise", "braked") == [b"2000.000000", b"80", b"4"]
    client.close()


def test_a_request_whose_previous_request_the_server_never_saw_begins_a_new_conversation(
        server, prefix):
    """Its previous request went through a proxy without the shared table:
    the pause since the older request the server did see is not the
    conversation's, so nothing is taken for cold."""
    table = RedisLastSeen(server.url, key_prefix=prefix)
    table.visit(HistoryKey("h-1", None), 0.0, 3, FIVE_MINUTES)
    other = RedisLastSeen(server.url, key_prefix=prefix)
    assert other.visit(HistoryKey("h-3", "h-2"), 5000.0, 7, FIVE_MINUTES) == WARM
    assert table.visit(HistoryKey("h-4", "h-3"), 5100.0, 9, FIVE_MINUTES) == WARM
    assert other.visit(HistoryKey("h-5", "h-4"), 6000.0, 11, FIVE_MINUTES) == cold(11)


def test_a_proxys_older_sighting_is_no_pause_once_the_conversation_moved_on_elsewhere(
        server, prefix):
    """A saw the conversation's first request; B served the next ones,
    reading its prefix until 400 s. A request that follows the first again
    (another answer to it, as a second run of one task, or a rewind) comes
    to A at 500 s: the shared table moved the conversation on, so to it
    this is a new conversation, as to a table in memory that saw every
    request; A's own sighting at 0 s is no measure of the pause."""
    a, b = (RedisLastSeen(server.url, key_prefix=prefix) for _ in range(2))
    memory = LastSeen()
    visits = [(a, HistoryKey("h-1", None), 0.0, 3), (b, HistoryKey("h-2", "h-1"), 200.0, 5),
              (b, HistoryKey("h-3", "h-2"), 400.0, 7),
              (a, HistoryKey("h-2b", "h-1"), 500.0, 5), (a, HistoryKey("h-1", None), 550.0, 3)]
    for proxy, key, now, end in visits:
        assert proxy.visit(key, now, end, FIVE_MINUTES) == memory.visit(
            key, now, end, FIVE_MINUTES) == WARM


def test_a_request_seen_while_the_server_was_out_of_reach_is_measured_from_that_sighting(
        tmp_path):
    """Sent again once the server is back, the server only knows the request
    before it, from before the outage: the proxy's later sighting is the
    conversation's latest, and no pause."""
    clock = Monotonic()
    server = RedisServer(tmp_path / "redis", free_port())
    server.start()
    try:
        table = RedisLastSeen(server.url, key_prefix="t:", monotonic=clock)
        table.visit(HistoryKey("h-1", None), 0.0, 3, FIVE_MINUTES)
        server.stop()
        assert table.visit(HistoryKey("h-2", "h-1"), 250.0, 5, FIVE_MINUTES) == WARM
        server.start()
        clock.now += RETRY_SECONDS
        assert table.visit(HistoryKey("h-2", "h-1"), 500.0, 5, FIVE_MINUTES) == WARM
        assert held(server, "t:") == {"h-2": frozenset()}
    finally:
        server.stop()


def test_another_key_prefix_shares_nothing(server, prefix):
    a = RedisLastSeen(server.url, key_prefix=prefix)
    other = RedisLastSeen(server.url, key_prefix=f"other-{prefix}")
    keys = HistoryKeys()
    a.visit(keys.of("c", 3), 0.0, 3, FIVE_MINUTES)
    a.visit(keys.of("c", 9), 1000.0, 9, FIVE_MINUTES)
    assert held(server, f"other-{prefix}") == {}
    assert other.visit(keys.of("c", 11), 1001.0, 11, FIVE_MINUTES) == WARM


def test_the_shared_table_answers_every_visit_as_the_table_in_memory(server, prefix):
    """The same visits (pauses around the lifetime, a retry, a retry
    planned out of order, a request following one that has moved on, two
    conversations) give the same cold ends and brakes."""
    visits = [("a", 0.0, 3, FIVE_MINUTES), ("b", 0.0, 5, FIVE_MINUTES),
              ("a", 300.0, 5, FIVE_MINUTES), ("a", 601.0, 7, FIVE_MINUTES),
              ("a", 602.0, 7, FIVE_MINUTES), ("a", 590.0, 7, FIVE_MINUTES),
              ("a", 550.0, 6, FIVE_MINUTES), ("a", 2000.0, 11, 3600),
              ("a", 6000.0, 13, 3600), ("b", 60.0, 7, FIVE_MINUTES),
              ("b", 10_000.0, 9, FIVE_MINUTES), ("b", 10_001.0, 10, NEVER_COLD)]
    tables: list[LastSeenTable] = [RedisLastSeen(server.url, key_prefix=prefix), LastSeen()]
    answers = []
    for table in tables:
        keys = HistoryKeys()
        answers.append([table.visit(keys.of(name, end), now, end, lifetime)
                        for name, now, end, lifetime in visits])
        table.add_surprise(keys.latest("b").own, 10_002.0, 100.0, 10.0, 10)
        answers[-1].append(Visit(table, 20_000.0).of(keys.of("b", 11), 11, FIVE_MINUTES))
    assert answers[0] == answers[1]
    assert answers[0][3] == cold(7) and answers[0][6] == WARM
    assert answers[0][10] == cold(9) and answers[0][-1] == Sighting(frozenset({9, 11}), 11)


def test_the_shared_table_answers_doubtful_pauses_as_the_table_in_memory(server, prefix):
    """Pauses between the shortest and the longest lifetime give the same
    doubtful ends, kept for every later request, through either proxy; a
    request sent again after its doubtful pause finds it once."""
    visits = [(0, "a", 0.0, 3), (1, "a", 250.0, 5), (0, "a", 251.0, 5), (1, "a", 300.0, 7),
              (0, "a", 800.0, 9), (1, "a", 1000.0, 11), (0, "a", 1300.0, 13)]
    proxies = [RedisLastSeen(server.url, key_prefix=prefix) for _ in range(2)]
    memory, keys, memory_keys = LastSeen(), HistoryKeys(), HistoryKeys()
    for number, name, now, end in visits:
        shared = proxies[number].visit(keys.of(name, end), now, end, 360, 240)
        assert shared == memory.visit(memory_keys.of(name, end), now, end, 360, 240)
    assert shared == Sighting(frozenset({9}), doubtful_ends=frozenset({5, 13}))


def test_the_least_recently_seen_conversations_go_past_the_bound(server, prefix):
    table = RedisLastSeen(server.url, key_prefix=prefix, conversations=3, cold_ends=2)
    keys = HistoryKeys()
    for n, name in enumerate(["c-1", "c-2", "c-3"]):
        table.visit(keys.of(name, 3), float(n), 3, FIVE_MINUTES)
        table.visit(keys.of(name, 5), 1000.0 + n, 5, FIVE_MINUTES)
    table.visit(keys.of("c-1", 6), 1010.0, 6, FIVE_MINUTES)  # c-1 seen again: c-2 is the oldest
    table.visit(keys.of("c-4", 3), 1020.0, 3, FIVE_MINUTES)
    assert sorted(held(server, prefix)) == sorted(keys.latest(f"c-{n}").own for n in (1, 3, 4))
    assert server.client().exists(f"{prefix}seen:{keys.latest('c-2').own}") == 0
    # The cold ends kept per conversation are bounded too, the oldest go.
    for n in range(4):
        table.visit(keys.of("c-1", 10 + n), 10_000.0 * (n + 2), 10 + n, FIVE_MINUTES)
    assert held(server, prefix)[keys.latest("c-1").own] == {12, 13}


def test_each_conversation_has_a_ttl_set_again_at_each_visit(server, prefix):
    table, keys = RedisLastSeen(server.url, key_prefix=prefix), HistoryKeys()
    client = server.client()
    table.visit(keys.of("c", 3), time.time(), 3, FIVE_MINUTES)
    client.expire(f"{prefix}seen:{keys.latest('c').own}", 60)
    table.visit(keys.of("c", 3), time.time(), 3, FIVE_MINUTES)  # a retry
    assert client.ttl(f"{prefix}seen:{keys.latest('c').own}") > 29 * 86_400
    client.expire(f"{prefix}seen:{keys.latest('c').own}", 60)
    table.visit(keys.of("c", 5), time.time(), 5, FIVE_MINUTES)
    assert client.ttl(f"{prefix}seen:{keys.latest('c').own}") > 29 * 86_400


def test_a_server_out_of_reach_never_holds_a_visit_up_and_is_asked_again_later(tmp_path):
    failures: list[BaseException] = []
    clock = Monotonic()
    server = RedisServer(tmp_path / "redis", free_port())
    table = RedisLastSeen(server.url, key_prefix="t:", failed=failures.append,
                          monotonic=clock)
    keys = HistoryKeys()
    started = time.monotonic()
    # Down: the proxy's own table answers, as it would alone.
    assert table.visit(keys.of("c", 3), 0.0, 3, FIVE_MINUTES) == WARM
    assert table.visit(keys.of("c", 5), 1000.0, 5, FIVE_MINUTES) == cold(5)
    assert time.monotonic() - started < 1.0
    assert len(failures) == 1  # not asked again within RETRY_SECONDS
    server.start()
    try:
        assert table.visit(keys.of("c", 7), 1100.0, 7, FIVE_MINUTES) == cold(5)  # still its own
        assert held(server, "t:") == {}
        clock.now += RETRY_SECONDS
        # Back: the server never saw the conversation, which is not taken
        # for paused (new to it); the cold end this proxy found joins it,
        # and from now on it is shared.
        assert table.visit(keys.of("c", 9), 1300.0, 9, FIVE_MINUTES) == cold(5)
        assert held(server, "t:") == {keys.latest("c").own: {5}}
        other = RedisLastSeen(server.url, key_prefix="t:")
        assert other.visit(keys.of("c", 11), 1400.0, 11, FIVE_MINUTES) == cold(5)
        assert len(failures) == 1
    finally:
        server.stop()


def test_forks_identical_runs_and_rewinds_are_answered_as_the_table_in_memory_does(
        server, prefix):
    """Two proxies in turn: a run, the same run again a day later (its
    entries found under their own histories, gone on from), a fork from its
    middle, and its first request sent again: never taken for cold, as a
    table in memory that saw every request answers."""
    proxies = [RedisLastSeen(server.url, key_prefix=prefix) for _ in range(2)]
    memory = LastSeen()
    day = 86_400.0
    visits = [(HistoryKey("h-1", None), 0.0, 3), (HistoryKey("h-2", "h-1"), 1000.0, 5),
              (HistoryKey("h-3", "h-2"), 1010.0, 7),
              (HistoryKey("h-1", None), day, 3), (HistoryKey("h-2", "h-1"), day + 10, 5),
              (HistoryKey("h-3", "h-2"), day + 20, 7), (HistoryKey("h-3b", "h-2"), day + 900, 7),
              (HistoryKey("h-1", None), day + 950, 3)]
    found = []
    for number, (key, now, end) in enumerate(visits):
        shared = proxies[number % 2].visit(key, now, end, FIVE_MINUTES)
        assert shared == memory.visit(key, now, end, FIVE_MINUTES), (key, now)
        found.append(shared.cold_ends)
    # The one real pause, seen through either proxy; then the second run
    # (its own conversation from its first request on), its fork and its
    # rewind: never cold.
    assert found == [frozenset(), {5}, {5}] + [frozenset()] * 5
