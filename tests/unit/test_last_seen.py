"""The table of when conversations were last seen (``conversation/billing/last_seen.py``):
a request that comes more than the cache's lifetime after its conversation's
previous one records its end as cold, for every later request; the table
is bounded, loses the least recently seen first, and is shared by threads."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import pytest

from obsmask_core.conversation.billing.last_seen import (
    A_DAY,
    AN_HOUR,
    LastSeen,
    Visit,
    cache_lifetime,
)

FIVE_MINUTES = 300


def test_a_conversation_seen_for_the_first_time_has_no_cold_end():
    """It may be new, or have been seen by another proxy or before a
    restart: its cache may be warm, so nothing is taken for cold."""
    table = LastSeen()
    assert table.visit("c-a", 1_000_000.0, 40, FIVE_MINUTES) == frozenset()
    assert table.cold_ends("c-a") == frozenset() and len(table) == 1


@pytest.mark.parametrize(("pause", "cold"), [(60, False), (300, False), (301, True),
                                             (3600, True)])
def test_a_request_after_more_than_the_lifetime_records_its_own_end_as_cold(pause, cold):
    table = LastSeen()
    table.visit("c-a", 1000.0, 3, FIVE_MINUTES)
    assert table.visit("c-a", 1000.0 + pause, 9, FIVE_MINUTES) == (
        frozenset({9}) if cold else frozenset())


def test_the_pause_is_counted_from_the_latest_request_not_the_first():
    """Every request reads the cache and keeps it alive: four minutes apart,
    each finds it warm, however long the conversation has run."""
    table = LastSeen()
    for minute, end in zip(range(0, 40, 4), range(3, 30, 2), strict=False):
        assert table.visit("c-a", minute * 60.0, end, FIVE_MINUTES) == frozenset()


def test_cold_ends_stay_for_every_later_request_and_belong_to_their_conversation():
    table = LastSeen()
    table.visit("c-a", 0.0, 3, FIVE_MINUTES)
    table.visit("c-b", 0.0, 5, FIVE_MINUTES)
    assert table.visit("c-a", 400.0, 7, FIVE_MINUTES) == {7}
    assert table.visit("c-a", 410.0, 9, FIVE_MINUTES) == {7}
    assert table.visit("c-a", 2000.0, 11, FIVE_MINUTES) == {7, 11}
    # The same request sent again at once (a retry) adds nothing.
    assert table.visit("c-a", 2001.0, 11, FIVE_MINUTES) == {7, 11}
    assert table.cold_ends("c-b") == frozenset()
    assert table.visit("c-b", 60.0, 7, FIVE_MINUTES) == frozenset()


def test_the_lifetime_is_the_requests_own():
    """A request whose cache lives an hour is not cold after ten minutes."""
    table = LastSeen()
    table.visit("c-a", 0.0, 3, AN_HOUR)
    assert table.visit("c-a", 600.0, 5, AN_HOUR) == frozenset()
    assert table.visit("c-a", 600.0 + AN_HOUR + 1, 7, AN_HOUR) == {7}


def test_a_request_planned_out_of_order_does_not_take_the_last_time_back():
    """A worker thread may plan an earlier request after a later one: the
    later time stays, and the earlier request is not cold."""
    table = LastSeen()
    table.visit("c-a", 1000.0, 3, FIVE_MINUTES)
    table.visit("c-a", 1200.0, 7, FIVE_MINUTES)
    assert table.visit("c-a", 1100.0, 5, FIVE_MINUTES) == frozenset()
    assert table.visit("c-a", 1450.0, 9, FIVE_MINUTES) == frozenset()


def test_the_conversation_seen_least_recently_goes_first_when_the_table_is_full():
    table = LastSeen(conversations=3)
    for name in ("c-a", "c-b", "c-c"):
        table.visit(name, 0.0, 3, FIVE_MINUTES)
    table.visit("c-a", 1000.0, 5, FIVE_MINUTES)  # cold, and now the most recent
    table.visit("c-d", 1000.0, 3, FIVE_MINUTES)  # c-b goes
    assert len(table) == 3
    assert table.cold_ends("c-a") == {5}
    assert table.visit("c-c", 5000.0, 9, FIVE_MINUTES) == {9}
    # c-b is forgotten: a request after a long pause is not known as cold.
    assert table.visit("c-b", 5000.0, 9, FIVE_MINUTES) == frozenset()


def test_a_conversation_keeps_its_latest_cold_ends_only():
    table = LastSeen(cold_ends=2)
    for pause, end in enumerate((3, 5, 7), 1):
        table.visit("c-a", pause * 1000.0, end, FIVE_MINUTES)
    assert table.visit("c-a", 4000.0, 9, FIVE_MINUTES) == {7, 9}


def test_clear_forgets_every_conversation():
    table = LastSeen()
    table.visit("c-a", 0.0, 3, FIVE_MINUTES)
    table.visit("c-a", 1000.0, 5, FIVE_MINUTES)
    table.clear()
    assert len(table) == 0 and table.cold_ends("c-a") == frozenset()


class SlowDict(OrderedDict):
    """The table's dictionary, letting other threads run after each removal:
    a visit that is not one step for the others shows."""

    def pop(self, *args):
        value = super().pop(*args)
        time.sleep(0.0001)
        return value


def test_of_several_threads_that_come_back_after_a_pause_exactly_one_finds_it_cold():
    """Several requests of each conversation at once, then several more
    after a long pause: the first of these finds the cache expired, the
    others find the time it set, and the table keeps one cold end a
    conversation and every conversation within its bound."""
    threads, conversations = 8, 120
    table = LastSeen(conversations=conversations // 2)
    table._kept = SlowDict()
    barrier = threading.Barrier(threads)

    def visits(worker: int) -> None:
        for number in range(conversations):
            name = f"c-{number}"
            table.visit(name, 0.0, 3, FIVE_MINUTES)
            barrier.wait()
            table.visit(name, 1000.0, 10 + worker, FIVE_MINUTES)
            barrier.wait()

    workers = [threading.Thread(target=visits, args=(w,)) for w in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(table) == conversations // 2
    kept = [table.cold_ends(f"c-{number}") for number in range(conversations // 2,
                                                                conversations)]
    assert all(len(ends) == 1 for ends in kept), kept


def test_a_visit_is_the_table_at_the_requests_time():
    table = LastSeen()
    Visit(table, 0.0).of("c-a", 3, FIVE_MINUTES)
    assert Visit(table, 301.0).of("c-a", 5, FIVE_MINUTES) == {5}


# cache_lifetime --------------------------------------------------------------------------


def test_anthropic_default_entries_are_cold_after_the_setting():
    assert cache_lifetime(300, anthropic=True, long_lived=False, retention=None) == 300
    assert cache_lifetime(360, anthropic=True, long_lived=False, retention=None) == 360


def test_anthropic_entries_of_an_hour_are_never_cold_sooner():
    assert cache_lifetime(300, anthropic=True, long_lived=True, retention=None) == AN_HOUR
    assert cache_lifetime(7200, anthropic=True, long_lived=True, retention=None) == 7200


def test_openai_caches_are_cold_no_sooner_than_they_are_gone_for_certain():
    """Its in-memory cache is cleared within an hour at the latest, its
    extended retention keeps a prefix up to a day."""
    assert cache_lifetime(300, anthropic=False, long_lived=False, retention=None) == AN_HOUR
    assert cache_lifetime(300, anthropic=False, long_lived=False,
                          retention="in_memory") == AN_HOUR
    assert cache_lifetime(300, anthropic=False, long_lived=False, retention="24h") == A_DAY
    assert cache_lifetime(2 * A_DAY, anthropic=False, long_lived=False,
                          retention="24h") == 2 * A_DAY
