"""The table of when conversations were last seen
(``conversation/billing/last_seen.py``): a request that comes more than the
cache's lifetime after its conversation's previous one records its end as
cold, for every later request; a conversation is known by its history, each
visit moving its entry from the previous request's key to the request's
own, so two conversations are one only while their prompts are; the table
is bounded, loses the least recently seen first, and is shared by threads.
And the lifetime (``cache_lifetime.py``): the setting, or the provider's
for the request and a margin for the clocks."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import pytest

from obsmask_core.conversation.billing.cache_lifetime import (
    A_DAY,
    AN_HOUR,
    CLOCK_MARGIN_SECONDS,
    FIVE_MINUTES,
    cache_lifetime,
    ttl_seconds,
)
from obsmask_core.conversation.billing.history_key import HistoryKey, history_key
from obsmask_core.conversation.billing.last_seen import LastSeen, Recorded, Sighting, Visit
from obsmask_core.conversation.planning.holdout import conversation_name
from support.chat import system, tool_result, tool_turn, user
from support.history_keys import HistoryKeys, cold_ends, own_key

WARM = Sighting()


def cold(*ends: int) -> Sighting:
    return Sighting(frozenset(ends))


def test_a_conversation_seen_for_the_first_time_has_no_cold_end():
    """It may be new, or have been seen by another proxy or before a
    restart: its cache may be warm, so nothing is taken for cold."""
    table, keys = LastSeen(), HistoryKeys()
    assert table.visit(keys.of("a", 40), 1_000_000.0, 40, FIVE_MINUTES) == WARM
    assert table.sighting(keys.latest("a")) == (1_000_000.0, WARM) and len(table) == 1


@pytest.mark.parametrize(("pause", "is_cold"), [(60, False), (300, False), (301, True),
                                                (3600, True)])
def test_a_request_after_more_than_the_lifetime_records_its_own_end_as_cold(pause, is_cold):
    table, keys = LastSeen(), HistoryKeys()
    table.visit(keys.of("a", 3), 1000.0, 3, FIVE_MINUTES)
    assert table.visit(keys.of("a", 9), 1000.0 + pause, 9, FIVE_MINUTES) == (
        cold(9) if is_cold else WARM)


@pytest.mark.parametrize(("pause", "found"), [(200, WARM), (240, WARM),
                                               (241, Sighting(doubtful_ends=frozenset({9}))),
                                               (360, Sighting(doubtful_ends=frozenset({9}))),
                                               (361, cold(9))])
def test_a_pause_the_cache_may_or_may_not_have_outlived_records_a_doubtful_end(pause, found):
    """Between the shortest time the provider may keep a prefix (less the
    clocks' margin) and the longest (plus it), nobody can say whether the
    cache expired: the request's end is doubtful, not cold."""
    table, keys = LastSeen(), HistoryKeys()
    table.visit(keys.of("a", 3), 1000.0, 3, 360, 240)
    assert table.visit(keys.of("a", 9), 1000.0 + pause, 9, 360, 240) == found


def test_doubtful_ends_stay_for_every_later_request_as_cold_ends_do():
    table, keys = LastSeen(), HistoryKeys()
    table.visit(keys.of("a", 3), 0.0, 3, 360, 240)
    table.visit(keys.of("a", 5), 300.0, 5, 360, 240)
    table.visit(keys.of("a", 7), 1000.0, 7, 360, 240)
    assert table.visit(keys.of("a", 9), 1010.0, 9, 360, 240) == Sighting(
        frozenset({7}), doubtful_ends=frozenset({5}))


def test_the_pause_is_counted_from_the_latest_request_not_the_first():
    """Every request reads the cache and keeps it alive: four minutes apart,
    each finds it warm, however long the conversation has run."""
    table, keys = LastSeen(), HistoryKeys()
    for minute, end in zip(range(0, 40, 4), range(3, 30, 2), strict=False):
        assert table.visit(keys.of("a", end), minute * 60.0, end, FIVE_MINUTES) == WARM


def test_cold_ends_stay_for_every_later_request_and_belong_to_their_conversation():
    table, keys = LastSeen(), HistoryKeys()
    table.visit(keys.of("a", 3), 0.0, 3, FIVE_MINUTES)
    table.visit(keys.of("b", 5), 0.0, 5, FIVE_MINUTES)
    assert table.visit(keys.of("a", 7), 400.0, 7, FIVE_MINUTES) == cold(7)
    assert table.visit(keys.of("a", 9), 410.0, 9, FIVE_MINUTES) == cold(7)
    assert table.visit(keys.of("a", 11), 2000.0, 11, FIVE_MINUTES) == cold(7, 11)
    # The same request sent again at once (a retry) adds nothing.
    assert table.visit(keys.of("a", 11), 2001.0, 11, FIVE_MINUTES) == cold(7, 11)
    assert cold_ends(table, keys.latest("b")) == frozenset()
    assert table.visit(keys.of("b", 7), 60.0, 7, FIVE_MINUTES) == WARM


def test_the_lifetime_is_the_requests_own():
    """A request whose cache lives an hour is not cold after ten minutes."""
    table, keys = LastSeen(), HistoryKeys()
    table.visit(keys.of("a", 3), 0.0, 3, AN_HOUR)
    assert table.visit(keys.of("a", 5), 600.0, 5, AN_HOUR) == WARM
    assert table.visit(keys.of("a", 7), 600.0 + AN_HOUR + 1, 7, AN_HOUR) == cold(7)


def test_a_request_planned_out_of_order_does_not_take_the_last_time_back():
    """A worker thread may plan a request after a later one (here the same
    request, sent again, planned before the first sending): the later
    time stays, so the next request, four minutes after it, is warm."""
    table, keys = LastSeen(), HistoryKeys()
    table.visit(keys.of("a", 3), 1000.0, 3, FIVE_MINUTES)
    assert table.visit(keys.of("a", 5), 1200.0, 5, FIVE_MINUTES) == WARM
    assert table.visit(keys.of("a", 5), 1100.0, 5, FIVE_MINUTES) == WARM
    assert table.sighting(keys.latest("a")) == (1200.0, WARM)
    assert table.visit(keys.of("a", 7), 1450.0, 7, FIVE_MINUTES) == WARM


def test_the_conversation_seen_least_recently_goes_first_when_the_table_is_full():
    table, keys = LastSeen(conversations=3), HistoryKeys()
    for name in ("a", "b", "c"):
        table.visit(keys.of(name, 3), 0.0, 3, FIVE_MINUTES)
    table.visit(keys.of("a", 5), 1000.0, 5, FIVE_MINUTES)  # cold, and now the most recent
    table.visit(keys.of("d", 3), 1000.0, 3, FIVE_MINUTES)  # b goes
    assert len(table) == 3
    assert cold_ends(table, keys.latest("a")) == {5}
    assert table.sighting(keys.latest("b")) is None
    assert table.visit(keys.of("c", 9), 5000.0, 9, FIVE_MINUTES) == cold(9)
    # b is forgotten: a request after a long pause is not known as cold.
    assert table.visit(keys.of("b", 9), 5000.0, 9, FIVE_MINUTES) == WARM


def test_a_conversation_keeps_its_latest_cold_ends_only():
    table, keys = LastSeen(cold_ends=2), HistoryKeys()
    for pause, end in enumerate((3, 5, 7), 1):
        table.visit(keys.of("a", end), pause * 1000.0, end, FIVE_MINUTES)
    assert table.visit(keys.of("a", 9), 4000.0, 9, FIVE_MINUTES) == cold(7, 9)


def test_clear_forgets_every_conversation():
    table, keys = LastSeen(), HistoryKeys()
    table.visit(keys.of("a", 3), 0.0, 3, FIVE_MINUTES)
    table.visit(keys.of("a", 5), 1000.0, 5, FIVE_MINUTES)
    table.clear()
    assert len(table) == 0 and table.sighting(keys.latest("a")) is None
    assert table.visit(keys.of("a", 7), 5000.0, 7, FIVE_MINUTES) == WARM


# Known by its history -------------------------------------------------------------------


def test_a_visit_carries_the_conversation_on_to_its_latest_requests_history():
    """Each request finds its conversation under its previous request's
    history and carries it on under its own; a retry of the latest request
    finds it under its own. The entries left behind go first when the table
    is full: the latest one stays."""
    table, keys = LastSeen(conversations=3), HistoryKeys()
    for end in range(3, 30, 2):
        key = keys.of("a", end)
        table.visit(key, end * 10.0, end, FIVE_MINUTES)
        assert table.sighting(HistoryKey(key.own, None)) == (end * 10.0, WARM)
        assert len(table) <= 3
    table.visit(keys.of("a", 29), 300.0, 29, FIVE_MINUTES)  # a retry
    assert table.sighting(HistoryKey(own_key("a", 29), None)) == (300.0, WARM)


def test_an_identical_run_long_ago_does_not_make_a_warm_request_cold():
    """Two runs of one task with the same tools and answers have the same
    histories. The second run finds under each request's own history the
    first run's entries, a day old: but a later request went on from each
    (it read that prefix later, when is unknown here), and under each
    previous request's history its own run's, seconds old: nothing is
    taken for cold (a cold turn missed costs a saving, a warm one taken
    for cold can raise the bill)."""
    table, keys = LastSeen(), HistoryKeys()
    for end, at in ((3, 0.0), (5, 10.0), (7, 20.0)):
        table.visit(keys.of("a", end), at, end, FIVE_MINUTES)
    day = 86_400.0
    for end, at in ((3, day), (5, day + 10.0), (7, day + 20.0)):
        assert table.visit(keys.of("a", end), at, end, FIVE_MINUTES).cold_ends == frozenset()


def test_a_request_sent_again_after_its_conversation_went_on_is_not_cold():
    """The first request sent again (a rewind) long after the conversation
    went on from it: the later requests read its prefix meanwhile."""
    table, keys = LastSeen(), HistoryKeys()
    for end, at in ((3, 0.0), (5, 200.0), (7, 400.0)):
        table.visit(keys.of("a", end), at, end, FIVE_MINUTES)
    assert table.visit(keys.of("a", 3), 550.0, 3, FIVE_MINUTES).cold_ends == frozenset()


def test_a_fork_takes_the_cold_ends_and_the_brake_and_is_never_cold():
    """Two requests go on from the same previous one (a sub-agent forked
    from the history, a retried branch): the second finds the
    conversation's cold ends and brake too, but when its prefix was last
    read is unknown here (the other branch kept it warm): never cold."""
    table = LastSeen()
    base, left, right = (HistoryKey("h-base", None), HistoryKey("h-left", "h-base"),
                         HistoryKey("h-right", "h-base"))
    table.visit(HistoryKey("h-start", None), 0.0, 3, FIVE_MINUTES)
    table.visit(HistoryKey("h-base", "h-start"), 1000.0, 7, FIVE_MINUTES)  # cold at 7
    table.add_surprise(base.own, 1000.0, 80.0, 50.0, 7)  # braked from 8
    assert table.visit(left, 1010.0, 9, FIVE_MINUTES) == Sighting(frozenset({7}), 8)
    assert table.visit(right, 5000.0, 9, FIVE_MINUTES) == Sighting(frozenset({7}), 8)


def test_a_request_whose_previous_request_this_table_never_saw_begins_a_new_conversation():
    """Another proxy served the request before it: the pause since the
    older request this table did see is not the conversation's (that proxy
    may have kept the cache warm), so nothing is taken for cold, however
    long it was; from then on the conversation is known again."""
    table = LastSeen()
    table.visit(HistoryKey("h-1", None), 0.0, 3, FIVE_MINUTES)
    # h-2 (5 items) went through another proxy.
    assert table.visit(HistoryKey("h-3", "h-2"), 10 * A_DAY, 7, FIVE_MINUTES) == WARM
    assert table.visit(HistoryKey("h-4", "h-3"), 10 * A_DAY + 60, 9, FIVE_MINUTES) == WARM
    assert table.visit(HistoryKey("h-5", "h-4"), 11 * A_DAY, 11, FIVE_MINUTES) == cold(11)


def answer_starts(items: list[dict[str, object]]) -> list[int]:
    return [number for number, item in enumerate(items) if item["role"] == "assistant"]


def run_of(task: str, answers: list[str], outputs: list[str]) -> list[dict[str, object]]:
    """A Chat conversation of one agent: its task, then one tool call and
    its output per answer."""
    items = [system(), user(task)]
    for number, (answer, output) in enumerate(zip(answers, outputs, strict=True)):
        items += [tool_turn(f"call_{number}", content=answer), tool_result(f"call_{number}",
                                                                          output)]
    return items


def test_two_runs_of_one_task_are_two_conversations_and_a_pause_of_one_leaves_the_other_warm():
    """Two runs of one task (the same first user message, the same number
    of items at each request) answered differently, their requests
    interleaved: the one that pauses longer than the lifetime comes back
    cold, the other, whose previous request came moments ago, stays warm
    and does not take the other's cold end."""
    members = {"model": "m", "tools": [{"type": "function", "function": {"name": "bash"}}]}
    first = run_of("Fix the bug.", ["Look at the tests.", "Read the log.", "Patch it."],
                   ["3 failed", "KeyError: 'a'", "ok"])
    second = run_of("Fix the bug.", ["Read the source.", "Grep for it.", "Run it."],
                    ["parser.py", "2 matches", "Traceback"])
    lifetime = cache_lifetime(0, anthropic=True, long_lived=False,
                              members=lambda: members).cold_after
    # Request n holds the first 2n items; the first run pauses after two.
    schedule = [(first, 1, 0.0), (second, 1, 1.0), (first, 2, 10.0), (second, 2, 11.0),
                (second, 3, 200.0), (first, 3, 500.0), (second, 4, 510.0)]
    table, by_name = LastSeen(), LastSeen()
    found, found_by_name = [], []
    for items, number, now in schedule:
        request = items[:2 * number]
        key = history_key(members, request, answer_starts(request))
        found.append(table.visit(key, now, len(request), lifetime))
        name = conversation_name(request)
        assert name is not None
        found_by_name.append(by_name.visit(HistoryKey(name.id, None), now, len(request),
                                           lifetime))
    assert found == [WARM, WARM, WARM, WARM, WARM, cold(6), WARM]
    # By its first user message, as before, the two were one: the pause
    # of the first was hidden by the requests of the second.
    assert conversation_name(first).id == conversation_name(second).id
    assert found_by_name == [WARM] * len(schedule)


def test_of_several_threads_sending_one_request_after_a_pause_all_find_its_one_cold_end():
    """Several requests of each conversation at once, then the same next
    request several times at once after a long pause: the first visit
    finds the cache expired and moves the entry, the others find it moved,
    with its cold end; the table keeps one entry a conversation and every
    conversation within its bound."""
    threads, conversations = 8, 120
    table = LastSeen(conversations=conversations // 2)
    table._kept = SlowDict()
    barrier = threading.Barrier(threads)
    found: list[Sighting] = []

    def visits() -> None:
        for number in range(conversations):
            table.visit(HistoryKey(f"h-{number}-3", None), 0.0, 3, FIVE_MINUTES)
            barrier.wait()
            found.append(table.visit(HistoryKey(f"h-{number}-10", f"h-{number}-3"), 1000.0,
                                     10, FIVE_MINUTES))
            barrier.wait()

    workers = [threading.Thread(target=visits) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert found == [cold(10)] * threads * conversations
    assert len(table) == conversations // 2
    assert all(table.sighting(HistoryKey(f"h-{number}-10", None)) == (1000.0, cold(10))
               for number in range(conversations // 2, conversations))


class SlowDict(OrderedDict):
    """The table's dictionary, letting other threads run after each removal:
    a visit that is not one step for the others shows."""

    def pop(self, *args):
        value = super().pop(*args)
        time.sleep(0.0001)
        return value


def test_a_visit_is_the_table_at_the_requests_time():
    table, keys = LastSeen(), HistoryKeys()
    Visit(table, 0.0).of(keys.of("a", 3), 3, FIVE_MINUTES)
    assert Visit(table, 301.0).of(keys.of("a", 5), 5, FIVE_MINUTES) == cold(5)


def test_a_recorded_arrival_finds_what_was_recorded_without_a_table():
    """Planning a flow again (the content view) finds its bill's cold ends
    and brake, whatever the key, end and lifetime."""
    recorded = Recorded(frozenset({5, 9}), 12)
    assert recorded.of(HistoryKey("h-x", "h-w"), 40, 1.0) == Sighting(frozenset({5, 9}), 12)
    assert Recorded(frozenset()).of(HistoryKey("h-y", None), 3, 1.0) == WARM


# cache_lifetime --------------------------------------------------------------------------


@pytest.mark.parametrize(("anthropic", "long_lived", "members"), [
    (True, False, {}), (True, True, {}), (False, False, {}),
    (False, False, {"prompt_cache_retention": "24h"}),
    (False, False, {"prompt_cache_options": {"ttl": "2h"}}),
])
def test_a_lifetime_set_by_the_user_is_the_lifetime_whatever_the_provider(
        anthropic, long_lived, members):
    """The setting is the user's word for a provider or gateway the rules
    do not describe: shorter or longer than the provider's, it is used as is."""
    for setting in (120, 360, 2 * A_DAY):
        assert cache_lifetime(setting, anthropic=anthropic, long_lived=long_lived,
                              members=lambda: members, ttl_option=True).cold_after == setting


def test_anthropic_entries_live_five_minutes_or_an_hour_and_the_clock_margin():
    assert cache_lifetime(0, anthropic=True, long_lived=False, members=dict).cold_after == (
        FIVE_MINUTES + CLOCK_MARGIN_SECONDS) == 360
    assert cache_lifetime(0, anthropic=True, long_lived=True, members=dict).cold_after == (
        AN_HOUR + CLOCK_MARGIN_SECONDS)


def test_openai_caches_are_cold_no_sooner_than_they_are_gone_for_certain():
    """Its in-memory cache is cleared within an hour at the latest, its
    extended retention keeps a prefix up to a day."""
    def lifetime(members: dict[str, object], ttl_option: bool = False) -> float:
        return cache_lifetime(0, anthropic=False, long_lived=False, members=lambda: members,
                              ttl_option=ttl_option).cold_after

    assert lifetime({}) == AN_HOUR + CLOCK_MARGIN_SECONDS
    assert lifetime({"prompt_cache_retention": "in_memory"}) == AN_HOUR + CLOCK_MARGIN_SECONDS
    assert lifetime({"prompt_cache_retention": "24h"}) == A_DAY + CLOCK_MARGIN_SECONDS
    assert lifetime({"prompt_cache_retention": "24h"}, ttl_option=True) == (
        A_DAY + CLOCK_MARGIN_SECONDS)


@pytest.mark.parametrize(("options", "ttl_option", "expected"), [
    ({"ttl": "2h"}, True, 2 * AN_HOUR),
    ({"ttl": 3 * AN_HOUR}, True, 3 * AN_HOUR),
    ({"ttl": "2h"}, False, AN_HOUR),  # a model that does not read it
    ({"ttl": "30m"}, True, AN_HOUR),  # shorter: the hour still holds
    ({"ttl": "soon"}, True, AN_HOUR),
    ("2h", True, AN_HOUR),
    ({}, True, AN_HOUR),
])
def test_an_openai_ttl_option_longer_than_an_hour_is_the_lifetime_for_models_that_read_it(
        options, ttl_option, expected):
    assert cache_lifetime(0, anthropic=False, long_lived=False,
                          members=lambda: {"prompt_cache_options": options},
                          ttl_option=ttl_option).cold_after == expected + CLOCK_MARGIN_SECONDS


def test_a_pause_is_doubtful_from_the_shortest_lifetime_less_the_clocks_margin():
    """Anthropic's entries written for 5 minutes go then, whatever others
    live an hour; OpenAI's in-memory cache may be cleared after 5 minutes,
    whatever retention is asked, and GPT-5.6's ttl is how long an entry is
    kept at least; the user's lifetime, less twice the margin."""
    def doubtful(setting: int, anthropic: bool, long_lived: bool = False,
                 members: dict[str, object] | None = None) -> float:
        return cache_lifetime(setting, anthropic=anthropic, long_lived=long_lived,
                              members=lambda: members or {}, ttl_option=True).doubtful_after

    assert doubtful(0, True) == doubtful(0, True, long_lived=True) == (
        FIVE_MINUTES - CLOCK_MARGIN_SECONDS)
    assert doubtful(0, False) == FIVE_MINUTES - CLOCK_MARGIN_SECONDS
    assert doubtful(0, False, members={"prompt_cache_retention": "24h"}) == (
        FIVE_MINUTES - CLOCK_MARGIN_SECONDS)
    assert doubtful(0, False, members={"prompt_cache_options": {"ttl": "30m"}}) == (
        30 * 60 - CLOCK_MARGIN_SECONDS)
    assert doubtful(900, True) == 900 - 2 * CLOCK_MARGIN_SECONDS
    assert doubtful(60, False) == 0


@pytest.mark.parametrize(("ttl", "seconds"), [
    (300, 300), ("300", 300), ("300s", 300), ("5m", 300), ("1h", 3600), (" 24H ", A_DAY),
    ("2d", 2 * A_DAY), ("1 h", 3600),
    (0, None), (-5, None), (True, None), (1.5, None), ("1w", None), ("h", None), (None, None),
])
def test_a_ttl_is_read_as_clients_write_one_and_nothing_else(ttl, seconds):
    assert ttl_seconds(ttl) == seconds
