"""The provider's brake in the table of when conversations were last seen
(``last_seen.LastSeen.add_surprise``, ``last_seen_redis``): the surprise is
summed per conversation, the brake trips once, when the sum goes past the
room the answer's bill left, from the request end after that answer's, and
stays; a visit keeps it; the shared table holds it for every proxy."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from obsmask_core.conversation.billing.last_seen import Braking, LastSeen, LastSeenTable, Visit
from obsmask_core.conversation.billing.last_seen_redis import RedisLastSeen
from support.redis_server import RedisServer, free_port, needs_redis, running_redis

FIVE_MINUTES = 300


def brakes_once_past_the_room(table: LastSeenTable) -> None:
    assert table.braked_from("c-a") is None
    assert table.add_surprise("c-a", 10.0, 50.0, 120.0, 9) == Braking(50.0, None, False)
    assert table.add_surprise("c-a", 20.0, 70.0, 130.0, 13) == Braking(120.0, None, False)
    assert table.add_surprise("c-a", 30.0, 30.0, 140.0, 17) == Braking(150.0, 18, True)
    assert table.braked_from("c-a") == 18 == Visit(table, 40.0).braked_from("c-a")
    # Once braked, it stays braked from there; the sum goes on.
    assert table.add_surprise("c-a", 50.0, -500.0, 140.0, 21) == Braking(-350.0, 18, False)
    assert table.add_surprise("c-a", 60.0, 900.0, 0.0, 25) == Braking(550.0, 18, False)
    assert table.braked_from("c-b") is None


def test_the_brake_trips_once_when_the_sum_goes_past_the_room():
    brakes_once_past_the_room(LastSeen())


def test_a_visit_keeps_the_brake_and_an_answer_is_a_sighting():
    """A conversation first known from an answer is taken as seen then: a
    request a minute later finds its cache warm."""
    table = LastSeen()
    table.add_surprise("c-a", 1000.0, 500.0, 10.0, 9)
    assert table.visit("c-a", 1060.0, 11, FIVE_MINUTES) == frozenset()
    assert table.braked_from("c-a") == 10
    table.remember("c-a", 1100.0, frozenset({11}))
    assert table.braked_from("c-a") == 10


def test_the_brake_goes_with_its_conversation_past_the_bound():
    table = LastSeen(conversations=2)
    table.add_surprise("c-a", 1.0, 500.0, 10.0, 9)
    table.visit("c-b", 2.0, 3, FIVE_MINUTES)
    table.visit("c-c", 3.0, 3, FIVE_MINUTES)
    assert table.braked_from("c-a") is None and len(table) == 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as running:
        yield running


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex[:12]}:"


@needs_redis
def test_the_shared_table_brakes_as_the_table_in_memory(server, prefix):
    brakes_once_past_the_room(RedisLastSeen(server.url, key_prefix=prefix))


@needs_redis
def test_a_brake_tripped_through_one_proxy_holds_for_every_proxy(server, prefix):
    a, b = (RedisLastSeen(server.url, key_prefix=prefix) for _ in range(2))
    a.visit("c-1", 0.0, 3, FIVE_MINUTES)
    assert b.add_surprise("c-1", 10.0, 40.0, 50.0, 5).braked_from is None
    assert a.add_surprise("c-1", 20.0, 40.0, 50.0, 7) == Braking(80.0, 8, True)
    assert b.braked_from("c-1") == 8
    assert RedisLastSeen(server.url, key_prefix=prefix).braked_from("c-1") == 8
    # The visits of the shared table keep the brake.
    assert b.visit("c-1", 30.0, 9, FIVE_MINUTES) == frozenset()
    assert a.braked_from("c-1") == 8


@needs_redis
def test_conversations_first_seen_by_an_answer_are_bounded_in_the_shared_table(server, prefix):
    """With cold_after_seconds off no visit trims the table: the answers'
    surprises do, to the same bound, the least recently seen going first."""
    table = RedisLastSeen(server.url, key_prefix=prefix, conversations=3)
    for number in range(6):
        table.add_surprise(f"c-{number}", float(number), 1.0, 50.0, 5)
    client = redis.Redis.from_url(server.url)
    assert [key.decode() for key in client.zrange(f"{prefix}seen:by-time", 0, -1)] == [
        f"{prefix}seen:c-{number}" for number in (3, 4, 5)]
    assert not client.exists(f"{prefix}seen:c-0")


@needs_redis
def test_a_server_out_of_reach_brakes_in_the_proxys_own_table(tmp_path):
    down = RedisServer(tmp_path / "redis", free_port())
    table = RedisLastSeen(down.url, key_prefix="t:")
    assert table.add_surprise("c-1", 0.0, 80.0, 50.0, 7) == Braking(80.0, 8, True)
    assert table.braked_from("c-1") == 8
