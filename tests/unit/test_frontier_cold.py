"""The frontier at a conversation's cold ends (``conversation/frontier/frontier.py``,
``ledger.py``, ``cache_billing.py``): a request the conversation came back
to after the cache's lifetime is billed whole, as sent and as forwarded, so
a move there is free and the frontier catches up; every later request,
planned with the same cold ends, makes the same decisions; a checkpoint is
resumed only by a replay with the same cold ends among its items."""

from __future__ import annotations

import json
from typing import cast

import pytest

from obsmask_core.conversation.billing.breakpoints import CacheLayout, read_layout
from obsmask_core.conversation.billing.ledger import prefix_tokens
from obsmask_core.conversation.billing.terms import BillingTerms
from obsmask_core.conversation.frontier.checkpoints import items_json
from obsmask_core.conversation.frontier.frontier import Frontier
from obsmask_core.conversation.frontier.replay_checkpoint import Checkpoint
from obsmask_core.conversation.masking.apply import apply_plan
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, WireFormat
from support.billing import chars_of
from support.formats import Call, Event, Result, Say, Turn, claude_code_body, convert

SMALL, MEDIUM, BIG = "s" * 300, "m" * 3000, "B" * 20_000
PROMPT, THINKING = "u" * 8000, "t" * 2000
# The shipped mitm.toml.
SHIPPED = {"window_turns": 1, "min_free_percent": 80, "price_model": "anthropic",
           "allowance_percent": 2}


def conversation(outputs: list[str]) -> list[Event]:
    events: list[Event] = [Say("user", PROMPT)]
    for turn, output in enumerate(outputs):
        events += [Turn([Call(f"c{turn}", "bash")], text=THINKING), Result(f"c{turn}", output)]
    return events


# Six results that are each too small to pay for their move on a warm cache,
# then one that pays for its own, then two more.
EVENTS = conversation([MEDIUM] * 6 + [BIG] + [SMALL] * 2)
COLD_AT = 5  # the request after five tool turns comes after a long pause


def request(events: list[Event], turns: int,
            fmt: WireFormat) -> tuple[list[object], CacheLayout | None]:
    """The items of the request sent after ``turns`` tool turns, as the
    client sends them (an Anthropic one as Claude Code does), and its
    breakpoints (None: not an Anthropic request)."""
    items = convert(fmt, events[: 1 + 2 * turns])
    if fmt is not ANTHROPIC:
        return items, None
    body = claude_code_body(items)
    items = cast(list[object], body["messages"])
    return items, read_layout(body, items)


def plan(events: list[Event], turns: int, fmt: WireFormat, cold_at: tuple[int, ...] = (),
         **policy: object) -> MaskPlan:
    """The plan of the request after ``turns`` tool turns, with cold ends at
    the requests after ``cold_at`` turns (those it holds)."""
    items, layout = request(events, turns, fmt)
    cold_ends = frozenset(len(request(events, at, fmt)[0]) for at in cold_at if at <= turns)
    return plan_masking(fmt.index(items), MaskPolicy(**(SHIPPED | policy)), items,
                        terms=BillingTerms(layout=layout, cold_ends=cold_ends))


def masked(plan: MaskPlan) -> list[str]:
    return [d.call_id for d in plan.decisions]


FORMATS = pytest.mark.parametrize("fmt", [CHAT, ANTHROPIC], ids=["prefix", "breakpoints"])


@FORMATS
def test_a_result_the_warm_ledger_keeps_for_good_is_masked_at_a_cold_request(fmt):
    """On a warm cache the four results out of the window at the fifth
    request do not pay for their move, then or later (under the prefix
    cache they are kept for good once the large one moves the frontier). At
    a cold request a move re-bills nothing: they are masked there, and the
    bill is below the original's."""
    warm = plan(EVENTS, COLD_AT, fmt)
    assert masked(warm) == [] and warm.kept["pending"] == 4
    assert not any({"c0", "c1", "c2", "c3"} & set(masked(plan(EVENTS, turns, fmt)))
                   for turns in range(1, 10))
    if fmt is CHAT:
        assert plan(EVENTS, 9, fmt).kept["cache"] == 6

    cold = plan(EVENTS, COLD_AT, fmt, cold_at=(COLD_AT,))
    assert masked(cold) == ["c0", "c1", "c2", "c3"] and cold.frontier_turn == 4
    assert cold.bill is not None and cold.bill.with_masking < cold.bill.without_masking


@FORMATS
def test_every_later_request_with_the_same_cold_ends_forwards_the_cold_requests_bytes(fmt):
    """The requests after the cold one hold it as a prefix: with its cold
    end they replay its decisions, so the items it forwarded go out again
    byte for byte (the provider reads them from the cache it wrote); without
    it their replay is the warm one, and they differ. (The client moves its
    own breakpoint off the last item: the items before it are compared.)"""
    items, _ = request(EVENTS, COLD_AT, fmt)
    cold_plan = plan(EVENTS, COLD_AT, fmt, cold_at=(COLD_AT,))
    cold_forwarded = apply_plan(items, cold_plan, fmt)[:-1]
    assert masked(cold_plan) == ["c0", "c1", "c2", "c3"]
    for turns in range(COLD_AT + 1, 10):
        later_items, _ = request(EVENTS, turns, fmt)
        later = plan(EVENTS, turns, fmt, cold_at=(COLD_AT,))
        assert {"c0", "c1", "c2", "c3"} <= set(masked(later))
        forwarded = apply_plan(later_items, later, fmt)
        assert json.dumps(forwarded[: len(cold_forwarded)]) == json.dumps(cold_forwarded)
        warm = plan(EVENTS, turns, fmt)
        assert "c0" not in masked(warm)
        assert json.dumps(apply_plan(later_items, warm, fmt)[: len(cold_forwarded)]) \
            != json.dumps(cold_forwarded)


@FORMATS
def test_the_bill_so_far_stays_within_the_allowance_with_cold_ends(fmt):
    for cold_at in [(COLD_AT,), (2, 7), (1, 3, 5, 8), tuple(range(1, 10))]:
        for turns in range(1, 10):
            bill = plan(EVENTS, turns, fmt, cold_at=cold_at).bill
            assert bill is not None
            assert bill.with_masking <= bill.without_masking * 1.02 + 1e-6, (cold_at, turns)


def text_chars(items: list[object]) -> int:
    """The characters of the items' strings, ``cache_control`` aside (the
    client moves it: not prompt text)."""
    def without_marks(value: object) -> object:
        if isinstance(value, dict):
            return {k: without_marks(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [without_marks(v) for v in value]
        return value
    return sum(chars_of(without_marks(item)) for item in items)


@FORMATS
def test_a_cold_request_is_billed_whole_as_sent_and_reads_nothing_as_forwarded(fmt):
    """At the cold request the bill without masking grows by the request's
    whole price, every token written at 1.25 (with the tools and system,
    under Anthropic's cache), and the provider is expected to read nothing
    of the forwarded one; on a warm cache the previous request is read."""
    items, layout = request(EVENTS, COLD_AT, fmt)
    preamble = layout.preamble_tokens if layout is not None else 0
    whole = 1.25 * (preamble + prefix_tokens(text_chars(items), len(items)))
    before = plan(EVENTS, COLD_AT - 1, fmt).bill
    cold = plan(EVENTS, COLD_AT, fmt, cold_at=(COLD_AT,)).bill
    warm = plan(EVENTS, COLD_AT, fmt).bill
    assert before is not None and cold is not None and warm is not None
    assert cold.without_masking - before.without_masking == pytest.approx(whole, abs=1e-3)
    assert cold.predicted_read == 0
    assert warm.without_masking - before.without_masking < whole / 2
    assert warm.predicted_read > 0


def test_at_a_cold_request_min_free_percent_holds_no_move_back():
    """min_free_percent weighs what a move frees against what it makes the
    provider bill again: at a cold request the provider bills it all
    anyway, so the plan is the one min_free_percent 0 makes."""
    events = conversation([SMALL] * 6)  # each frees far less than its turn's text
    strict = plan(events, COLD_AT, ANTHROPIC, cold_at=(COLD_AT,), min_free_percent=80)
    assert strict == plan(events, COLD_AT, ANTHROPIC, cold_at=(COLD_AT,), min_free_percent=0)
    assert masked(strict) == ["c0", "c1", "c2", "c3"]


def test_a_cold_request_judges_again_the_results_kept_for_the_caches_sake():
    """Small results, which no move on Anthropic's warm cache pays for, stay
    pending until they are LOOKBACK_TURNS behind, then are kept for good
    (kept for the cache's sake). At a cold request after 25 turns the
    provider writes the whole prompt anyway: the frontier jumps to the
    window, and the results kept earlier are masked too."""
    events = conversation([SMALL] * 26)
    warm = plan(events, 25, ANTHROPIC)
    assert masked(warm) == [] and warm.kept["cache"] == 8
    cold = plan(events, 25, ANTHROPIC, cold_at=(25,))
    assert masked(cold) == [f"c{turn}" for turn in range(24)]
    assert cold.kept.get("cache", 0) == 0 and cold.frontier_turn == 24
    assert cold.bill is not None and cold.bill.with_masking < cold.bill.without_masking


def test_the_warm_requests_after_a_cold_one_keep_what_it_masked_again():
    """The requests after the cold one replay it with its cold end: the
    results it took back from the cache's keeping stay masked, and the
    bill so far stays within the allowance on every one of them."""
    events = conversation([SMALL] * 30)
    for turns in range(26, 31):
        later = plan(events, turns, ANTHROPIC, cold_at=(25,))
        assert {f"c{turn}" for turn in range(24)} <= set(masked(later))
        assert later.bill is not None
        assert later.bill.with_masking <= later.bill.without_masking * 1.02 + 1e-6


def test_a_braked_conversation_takes_nothing_back_at_a_cold_request():
    """The provider's brake says the ledger's reading of the cache is wrong
    for this conversation: from its request end on, not even a cold request
    moves the frontier or masks what was kept."""
    events = conversation([SMALL] * 26)
    items, layout = request(events, 25, ANTHROPIC)
    cold_end = frozenset({len(items)})
    terms = BillingTerms(layout=layout, cold_ends=cold_end,
                         braked_from=len(request(events, 20, ANTHROPIC)[0]))
    braked = plan_masking(ANTHROPIC.index(items), MaskPolicy(**SHIPPED), items, terms=terms)
    assert masked(braked) == []


def test_a_cold_end_where_no_request_ends_changes_nothing():
    """A cold end is a request's number of items; one inside a turn (the
    client sent other items after the pause) is not a request of this
    conversation's history."""
    items, _ = request(EVENTS, COLD_AT, CHAT)
    inside = len(items) - 1
    policy = MaskPolicy(**SHIPPED)
    with_it = plan_masking(CHAT.index(items), policy, items,
                           terms=BillingTerms(cold_ends=frozenset({inside})))
    without = plan_masking(CHAT.index(items), policy, items)
    assert with_it == without
    assert with_it.bill is not None and with_it.bill.cold_ends == ()


def test_cold_ends_change_nothing_without_a_price_model_with_a_cache():
    for turns in range(1, 10):
        warm = plan(EVENTS, turns, CHAT, price_model="none")
        cold = plan(EVENTS, turns, CHAT, cold_at=(COLD_AT,), price_model="none")
        assert cold == warm and cold.bill is None


def test_the_bill_says_which_requests_were_billed_cold():
    bill = plan(EVENTS, 9, CHAT, cold_at=(2, COLD_AT)).bill
    assert bill is not None
    ends = (len(request(EVENTS, 2, CHAT)[0]), len(request(EVENTS, COLD_AT, CHAT)[0]))
    assert bill.cold_ends == ends
    assert bill.as_metadata()["cold_ends"] == list(ends)


# Checkpoints -----------------------------------------------------------------------------

POLICY = MaskPolicy(**SHIPPED)


def frontier_of(items: list[object], cold_ends: frozenset[int] = frozenset(),
                resume: Checkpoint | None = None) -> Frontier:
    index = CHAT.index(items)
    maskable = {n: "[masked]" for n, r in enumerate(index.results)
                if r.turn < len(index.turns) - POLICY.window_turns}
    return Frontier(index, items, POLICY, maskable, resume=resume,
                    terms=BillingTerms(cold_ends=cold_ends))


def checkpoint_of(items: list[object], cold_ends: frozenset[int] = frozenset()) -> Checkpoint:
    written = items_json(items)
    assert written is not None
    return frontier_of(items, cold_ends).checkpoint(written)


def same_state(a: Frontier, b: Frontier) -> bool:
    return (a.turn, list(a.masked_turns()), a.bill()) == (b.turn, list(b.masked_turns()), b.bill())


@pytest.mark.parametrize(("made_with", "replayed_with"), [
    ((), (COLD_AT,)),  # the table learnt of a pause the checkpoint did not see
    ((COLD_AT,), ()),  # the table lost it (a restart)
    ((2,), (COLD_AT,)),
])
def test_a_checkpoint_made_with_other_cold_ends_among_its_items_is_not_resumed(
        restores, made_with, replayed_with):
    earlier, _ = request(EVENTS, 6, CHAT)
    later, _ = request(EVENTS, 9, CHAT)

    def ends(at: tuple[int, ...]) -> frozenset[int]:
        return frozenset(len(request(EVENTS, turns, CHAT)[0]) for turns in at)

    again = frontier_of(later, ends(replayed_with), checkpoint_of(earlier, ends(made_with)))
    assert restores == []
    assert same_state(again, frontier_of(later, ends(replayed_with)))


def test_a_checkpoint_made_with_the_same_cold_ends_is_resumed_and_agrees(restores):
    """Cold ends after the checkpoint's items are the replay's own business."""
    earlier, _ = request(EVENTS, 6, CHAT)
    later, _ = request(EVENTS, 9, CHAT)
    cold = len(request(EVENTS, COLD_AT, CHAT)[0])
    after = len(request(EVENTS, 8, CHAT)[0])
    checkpoint = checkpoint_of(earlier, frozenset({cold}))
    again = frontier_of(later, frozenset({cold, after}), checkpoint)
    assert restores == [checkpoint]
    assert same_state(again, frontier_of(later, frozenset({cold, after})))
    assert not same_state(again, frontier_of(later, frozenset({cold})))
