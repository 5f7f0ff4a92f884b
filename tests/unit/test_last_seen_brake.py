"""The provider's brake in the table of when conversations were last seen
(``last_seen.LastSeen.add_surprise``, ``last_seen_redis``): the surprise is
summed per conversation, the brake trips once, when the sum goes past the
room the answer's bill left, from the request end after that answer's, and
stays; each visit finds it, and moves it (and the sum) along with the
conversation to the request's own history; the shared table holds it for
every proxy."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from obsmask_core.conversation.billing.cache_lifetime import FIVE_MINUTES, NEVER_COLD
from obsmask_core.conversation.billing.history_key import HistoryKey
from obsmask_core.conversation.billing.last_seen import (
    Braking,
    LastSeen,
    LastSeenTable,
    Sighting,
    Visit,
)
from obsmask_core.conversation.billing.last_seen_redis import RedisLastSeen
from support.history_keys import HistoryKeys
from support.redis_server import RedisServer, free_port, needs_redis, running_redis


def brakes_once_past_the_room(table: LastSeenTable) -> None:
    """Each request visits the table, then its answer adds its surprise
    under the request's own history (where the next request finds it)."""
    keys = HistoryKeys()

    def answered(end: int, now: float, surprise: float, room: float) -> tuple[Sighting, Braking]:
        key = keys.of("a", end)
        found = table.visit(key, now, end, NEVER_COLD)
        return found, table.add_surprise(key.own, now + 5.0, surprise, room, end)

    assert answered(9, 5.0, 50.0, 120.0) == (Sighting(), Braking(50.0, None, False))
    assert answered(13, 15.0, 70.0, 130.0) == (Sighting(), Braking(120.0, None, False))
    assert answered(17, 25.0, 30.0, 140.0) == (Sighting(), Braking(150.0, 18, True))
    assert Visit(table, 40.0).of(keys.of("a", 21), 21, NEVER_COLD) == Sighting(braked_from=18)
    # Once braked, it stays braked from there; the sum goes on.
    assert table.add_surprise(keys.latest("a").own, 50.0, -500.0, 140.0, 21) == Braking(
        -350.0, 18, False)
    assert answered(25, 55.0, 900.0, 0.0) == (Sighting(braked_from=18),
                                               Braking(550.0, 18, False))
    # Another conversation has its own.
    assert table.visit(keys.of("b", 25), 60.0, 25, NEVER_COLD) == Sighting()


def test_the_brake_trips_once_when_the_sum_goes_past_the_room():
    brakes_once_past_the_room(LastSeen())


def test_the_brake_goes_on_with_the_conversation_and_nowhere_else():
    table, keys = LastSeen(), HistoryKeys()
    table.visit(keys.of("a", 9), 0.0, 9, FIVE_MINUTES)
    table.add_surprise(keys.latest("a").own, 1.0, 80.0, 50.0, 9)
    assert table.braked_from(keys.latest("a").own) == 10
    table.visit(keys.of("a", 11), 2.0, 11, FIVE_MINUTES)
    assert table.braked_from(keys.latest("a").own) == 10
    assert table.braked_from(keys.of("b", 9).own) is None
    assert table.braked_from("h-unknown") is None


def test_a_visit_keeps_the_brake_and_an_answer_is_a_sighting():
    """A conversation first known from an answer is taken as seen then: a
    request a minute later finds its cache warm, and the brake."""
    table, keys = LastSeen(), HistoryKeys()
    table.add_surprise(keys.of("a", 9).own, 1000.0, 500.0, 10.0, 9)
    assert table.visit(keys.of("a", 11), 1060.0, 11, FIVE_MINUTES) == Sighting(braked_from=10)
    assert table.braked_from(keys.latest("a").own) == 10


def test_what_another_table_found_replaces_the_brake_and_keeps_the_sum():
    """The shared table's answer (``remember``) is the conversation's, under
    the request's own history; the sum of surprises stays this table's
    unless the answer brings one."""
    table, keys = LastSeen(), HistoryKeys()
    table.add_surprise(keys.of("a", 9).own, 1000.0, 500.0, 10.0, 9)
    table.remember(keys.of("a", 13), 1100.0, Sighting(frozenset({11}), 12))
    assert table.sighting(keys.latest("a")) == (1100.0, Sighting(frozenset({11}), 12))
    assert table.sighting(HistoryKey(keys.of("a", 9).own, None)) is None and len(table) == 1
    assert table.add_surprise(keys.latest("a").own, 1110.0, 1.0, 10.0, 13) == Braking(
        501.0, 12, False)
    table.remember(keys.of("a", 15), 1200.0, Sighting(frozenset({11}), 12), surprise=7.0)
    assert table.add_surprise(keys.latest("a").own, 1210.0, 1.0, 10.0, 15) == Braking(
        8.0, 12, False)


def test_the_brake_goes_with_its_conversation_past_the_bound():
    table, keys = LastSeen(conversations=2), HistoryKeys()
    table.add_surprise(keys.of("a", 9).own, 1.0, 500.0, 10.0, 9)
    table.visit(keys.of("b", 3), 2.0, 3, FIVE_MINUTES)
    table.visit(keys.of("c", 3), 3.0, 3, FIVE_MINUTES)
    assert table.braked_from(keys.latest("a").own) is None and len(table) == 2
    assert table.visit(keys.of("a", 11), 4.0, 11, FIVE_MINUTES) == Sighting()


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
    keys = HistoryKeys()
    a.visit(keys.of("c", 3), 0.0, 3, FIVE_MINUTES)
    assert b.add_surprise(keys.latest("c").own, 10.0, 40.0, 50.0, 3).braked_from is None
    b.visit(keys.of("c", 5), 15.0, 5, FIVE_MINUTES)
    assert a.add_surprise(keys.latest("c").own, 20.0, 40.0, 50.0, 5) == Braking(80.0, 6, True)
    assert b.visit(keys.of("c", 7), 30.0, 7, FIVE_MINUTES) == Sighting(braked_from=6)
    restarted = RedisLastSeen(server.url, key_prefix=prefix)
    assert restarted.visit(keys.of("c", 9), 40.0, 9, FIVE_MINUTES) == Sighting(braked_from=6)
    # The visits of the shared table keep the brake.
    assert a.visit(keys.of("c", 11), 50.0, 11, FIVE_MINUTES) == Sighting(braked_from=6)
    assert a.local.braked_from(keys.latest("c").own) == 6


@needs_redis
def test_conversations_first_seen_by_an_answer_are_bounded_in_the_shared_table(server, prefix):
    """With cold_after_seconds off no visit trims the table: the answers'
    surprises do, to the same bound, the least recently seen going first."""
    table = RedisLastSeen(server.url, key_prefix=prefix, conversations=3)
    for number in range(6):
        table.add_surprise(f"h-{number}", float(number), 1.0, 50.0, 5)
    client = redis.Redis.from_url(server.url)
    assert [key.decode() for key in client.zrange(f"{prefix}seen:by-time", 0, -1)] == [
        f"{prefix}seen:h-{number}" for number in (3, 4, 5)]
    assert not client.exists(f"{prefix}seen:h-0")
    client.close()


@needs_redis
def test_a_server_out_of_reach_brakes_in_the_proxys_own_table(tmp_path):
    down = RedisServer(tmp_path / "redis", free_port())
    table, keys = RedisLastSeen(down.url, key_prefix="t:"), HistoryKeys()
    table.visit(keys.of("c", 7), 0.0, 7, FIVE_MINUTES)
    assert table.add_surprise(keys.latest("c").own, 1.0, 80.0, 50.0, 7) == Braking(80.0, 8, True)
    assert table.visit(keys.of("c", 9), 2.0, 9, FIVE_MINUTES) == Sighting(braked_from=8)
