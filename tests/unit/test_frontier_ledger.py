"""The frontier with a price model (``conversation/frontier/frontier.py``, ``ledger.py``)
and the holdout (``holdout.py``): results that leave the window are masked
only when the bill of the conversation so far stays within allowance_percent
of the bill without masking, the others are kept for good ("cache"); a stable
share of conversations is never masked."""

from __future__ import annotations

import json
import re

import pytest

from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.masking.outcomes import Masked, Unchanged
from obsmask_core.conversation.masking.rewrite import HELD_OUT, mask_request_body
from obsmask_core.conversation.masking.summary import LeftAlone
from obsmask_core.conversation.planning.holdout import (
    conversation_bucket,
    conversation_id,
    held_out,
)
from obsmask_core.conversation.planning.plan import CLIPPED, MaskPlan
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES
from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.settings import check_value
from support.billing import rebill, so_far
from support.formats import Call, Event, Result, Say, Turn, convert, session
from support.planning import PREFIX_CACHE
from support.planning import plan_of as plan_of_request

SMALL, MEDIUM, BIG = "s" * 300, "m" * 3000, "B" * 20_000
# A first message over 1024 estimated tokens, so the provider caches from the
# first request on, and a model's text long enough to weigh in the bill.
PROMPT, THINKING = "u" * 8000, "t" * 2000
# The shipped mitm.toml.
SHIPPED = {"window_turns": 1, "min_free_percent": 80, "price_model": "anthropic",
           "allowance_percent": 2}


def plan_of(events: list[Event], fmt=CHAT, **policy: object) -> MaskPlan:
    """The plan, billed under the longest-common-prefix reading of the cache
    (``PREFIX_CACHE``): the rules of the frontier's moves, told on figures
    a reader can follow (the provider's own caches: test_cache_billing.py)."""
    return plan_of_request(events, fmt, PREFIX_CACHE, **policy)


def conversation(outputs: list[str], prompt: str = PROMPT, text: str = THINKING,
                 tools: list[str] | None = None) -> list[Event]:
    """The prompt, then one tool turn per output, each with its result (c0,
    c1...), calling "bash" or the tools named."""
    events: list[Event] = [Say("user", prompt)]
    for turn, output in enumerate(outputs):
        tool = tools[turn] if tools else "bash"
        events += [Turn([Call(f"c{turn}", tool)], text=text), Result(f"c{turn}", output)]
    return events


def after_turns(events: list[Event], turns: int) -> list[Event]:
    """The request sent after the first ``turns`` tool turns and their results."""
    return events[: 1 + 2 * turns]


def masked_calls(plan: MaskPlan) -> list[str]:
    return [d.call_id for d in plan.decisions]


def within_allowance(plan: MaskPlan, allowance: int) -> bool:
    assert plan.bill is not None
    return plan.bill.with_masking <= plan.bill.without_masking * (1 + allowance / 100) + 1e-6


# price_model = "none": the plain window ------------------------------------------------


@pytest.mark.parametrize("window", [1, 2, 3])
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("min_free", [0, 50])
def test_without_a_cache_the_frontier_is_the_plain_window(window, batch, min_free):
    """price_model "none" (the default) keeps no ledger: the plan is the one
    the window, batch_turns and min_free_percent make, with no bill and no
    result kept for the cache."""
    for turns in range(1, 10):
        events = session(turns=turns)
        plan = plan_of(events, window_turns=window, batch_turns=batch,
                       min_free_percent=min_free, price_model="none")
        assert plan == plan_of(events, window_turns=window, batch_turns=batch,
                               min_free_percent=min_free)
        assert plan.bill is None and plan.kept["cache"] == 0 and not plan.held_out
        target = max(0, turns - window)
        if min_free == 0:
            assert plan.frontier_turn == target - target % batch
            assert plan.masked == plan.frontier_turn


def test_without_a_cache_min_free_percent_moves_the_frontier_as_before():
    """The example of test_frontier.py, with price_model "none" said aloud."""
    events = conversation([SMALL] * 4 + [BIG, SMALL], prompt="go", text="t")
    frontiers = [plan_of(after_turns(events, t), window_turns=1, min_free_percent=50,
                         price_model="none").frontier_turn for t in range(1, 7)]
    assert frontiers == [0, 0, 2, 2, 2, 5]


# price_model with a cache: the ledger ------------------------------------------------------


def test_a_small_result_is_not_masked_by_a_move_the_allowance_cannot_pay_and_is_kept_for_good():
    """Masking c0 when it leaves the window re-bills more than 1% of the bill
    so far (with an allowance of 100% it goes, and the bill then shows 1.0106):
    with allowance_percent = 1 it stays; at the next move only c1 is masked,
    and c0 is kept for good, reason "cache", in every later request."""
    events = conversation([SMALL] * 4 + [BIG, SMALL, SMALL])
    policy = {"window_turns": 1, "price_model": "anthropic"}

    generous = plan_of(after_turns(events, 2), allowance_percent=100, **policy)
    assert masked_calls(generous) == ["c0"]
    assert generous.bill is not None and generous.bill.ratio is not None
    assert 1.01 < generous.bill.ratio

    second = plan_of(after_turns(events, 2), allowance_percent=1, **policy)
    assert masked_calls(second) == []
    assert second.frontier_turn == 0 and second.kept["pending"] == 1
    assert second.bill is not None and second.bill.with_masking == second.bill.without_masking

    third = plan_of(after_turns(events, 3), allowance_percent=1, **policy)
    assert masked_calls(third) == ["c1"]
    assert third.frontier_turn == 2 and third.kept["cache"] == 1
    for turns in range(3, 8):
        plan = plan_of(after_turns(events, turns), allowance_percent=1, **policy)
        assert "c0" not in masked_calls(plan) and plan.kept["cache"] >= 1
        assert "c1" in masked_calls(plan)
        assert within_allowance(plan, 1)


def test_a_large_result_is_masked_as_soon_as_it_leaves_a_window_of_one():
    """With the shipped settings (window 1, min_free_percent 80, anthropic,
    2%) the small results never pay for their masking, but the 20 kB one
    does the request after it leaves the window; the small ones before it
    are then kept for good."""
    events = conversation([SMALL] * 4 + [BIG, SMALL])
    before = plan_of(after_turns(events, 5), **SHIPPED)  # c4 is the window
    assert masked_calls(before) == [] and before.kept["pending"] == 4
    after = plan_of(after_turns(events, 6), **SHIPPED)
    assert masked_calls(after) == ["c4"]
    assert after.frontier_turn == 5
    assert after.kept["cache"] == 4 and after.kept["in_window"] == 1
    assert within_allowance(after, 2)
    # The bill so far, in the flow's metadata.
    assert after.bill is not None
    meta = after.bill.as_metadata()
    assert meta["price_model"] == "anthropic" and meta["allowance_percent"] == 2
    assert meta["requests"] == 7  # the prompt alone, then after each of the 6 turns


def test_a_large_result_is_masked_only_when_the_bill_allows_it():
    """The same large result, but the allowance is too small for the move:
    it is kept for good, like a small one."""
    events = conversation([SMALL] * 4 + [BIG, SMALL, SMALL])
    plan = plan_of(after_turns(events, 7), window_turns=1, price_model="anthropic",
                   allowance_percent=0)
    assert masked_calls(plan) == []
    assert plan.bill is not None and plan.bill.with_masking == plan.bill.without_masking


@pytest.mark.parametrize("price_model", ["anthropic", "openai", "openai_50"])
def test_a_larger_allowance_masks_at_least_as_much(price_model):
    """allowance_percent = 100 masks at least as many results as 0, in every
    request of several conversations, and strictly more in some."""
    conversations = [
        conversation([SMALL] * 4 + [BIG, SMALL, SMALL]),
        conversation([BIG, SMALL] * 4),
        conversation([SMALL] * 10),
        session(turns=12),
    ]
    more = 0
    for events in conversations:
        turns = sum(isinstance(e, Turn) for e in events)
        for t in range(1, turns + 1):
            request = after_turns(events, t)
            stingy = plan_of(request, window_turns=1, price_model=price_model,
                             allowance_percent=0)
            generous = plan_of(request, window_turns=1, price_model=price_model,
                               allowance_percent=100)
            assert generous.masked >= stingy.masked
            more += generous.masked > stingy.masked
    assert more > 0


def test_a_move_whose_reads_pay_back_too_slowly_waits_under_payback_factor():
    """With room in the allowance for every move, a 300-character result
    frees about 170 characters, read at 0.1x on each later request, against
    re-billing the 2,000-character turn after it at 1.25x: it would take
    some 80 requests to pay, far more than 8 times the two or three the
    conversation has made, so with payback_factor 8 it is not masked; the
    20,000-character result pays at once and is."""
    events = conversation([BIG, SMALL, SMALL, SMALL, SMALL])
    policy = {"window_turns": 1, "price_model": "anthropic", "allowance_percent": 50}

    def masked(turns: int, factor: int) -> list[str]:
        return masked_calls(plan_of(after_turns(events, turns), **policy,
                                    payback_factor=factor))

    assert masked(5, 0) == ["c0", "c1", "c2", "c3"]
    assert masked(2, 8) == ["c0"] and masked(5, 8) == ["c0"]


def test_undecided_turns_far_behind_the_target_are_kept_for_good():
    """A move reaches back at most 16 turns (LOOKBACK_TURNS): when
    trigger_tokens holds the frontier until turn 22, the move then masks
    turns 6 to 21 (the allowance pays for all of them) and keeps 0 to 5."""
    events = conversation([SMALL] * 30)
    policy = {"window_turns": 1, "trigger_tokens": 15_000, "price_model": "anthropic",
              "allowance_percent": 100}
    held = plan_of(after_turns(events, 22), **policy)
    assert held.frontier_turn == 0 and held.kept["pending"] == 21
    moved = plan_of(after_turns(events, 23), **policy)
    assert moved.frontier_turn == 22
    assert masked_calls(moved) == [f"c{turn}" for turn in range(6, 22)]
    assert moved.kept["cache"] == 6
    final = plan_of(events, **policy)
    assert final.kept["cache"] == 6 and final.masked == 23


# The holdout ----------------------------------------------------------------------------


def first_message_in_bucket(bucket: int, fmt=CHAT) -> list[Event]:
    """A conversation (a session of 4 turns) whose first message hashes to ``bucket``."""
    for n in range(10_000):
        events: list[Event] = [Say("user", f"Fix bug #{n}."), *session(turns=4)[1:]]
        if conversation_bucket(convert(fmt, events)) == bucket:
            return events
    raise AssertionError(f"no first message found for bucket {bucket}")


@pytest.mark.parametrize("fmt", [CHAT, ANTHROPIC, RESPONSES], ids=lambda f: f.name)
def test_a_conversation_is_held_out_when_its_bucket_is_below_holdout_percent(fmt):
    events = first_message_in_bucket(37, fmt)
    inside = plan_of(events, fmt, window_turns=1, holdout_percent=38)
    assert inside.held_out and inside.decisions == [] and inside.stage == "none"
    assert inside.bill is None
    outside = plan_of(events, fmt, window_turns=1, holdout_percent=37)
    assert not outside.held_out and outside.masked == 3


def test_every_request_of_a_held_out_conversation_is_held_out():
    """The first item decides: every request of the conversation lands in
    the same group."""
    events = first_message_in_bucket(3)
    for turns in range(0, 5):
        request = after_turns(events, turns)
        assert held_out(convert(CHAT, request), 4)
        assert not held_out(convert(CHAT, request), 3)


def test_holdout_percent_0_holds_nothing_out_and_100_holds_everything_out():
    for n in range(300):
        events: list[Event] = [Say("user", f"task {n}"), *session(turns=3)[1:]]
        items = convert(CHAT, events)
        assert not held_out(items, 0)
        assert held_out(items, 100)
        assert plan_of(events, window_turns=1, holdout_percent=0).masked == 2
        plan = plan_of(events, window_turns=1, holdout_percent=100)
        assert plan.held_out and plan.decisions == []
    assert not held_out([], 100)  # no first item, no group


@pytest.mark.parametrize("fmt", [CHAT, ANTHROPIC, RESPONSES], ids=lambda f: f.name)
def test_every_request_of_a_conversation_carries_its_name_and_another_task_another(fmt):
    """Totals and reports group requests by the conversation's name: a hash
    of the first user message, so it grows with the session but never
    changes, and it holds none of the text."""
    events: list[Event] = [Say("user", "Fix bug #7 in parser.py"), *session(turns=4)[1:]]
    names = {plan_of(after_turns(events, turns), fmt).conversation for turns in range(5)}
    assert len(names) == 1
    (name,) = names
    assert name is not None and re.fullmatch(r"c-[0-9a-f]{12}", name)
    other: list[Event] = [Say("user", "Fix bug #8 in parser.py"), *session(turns=4)[1:]]
    assert plan_of(other, fmt).conversation != name
    assert conversation_id([]) is None


def test_moving_a_cache_control_marker_does_not_move_the_conversation():
    """Clients move their cache breakpoints from request to request: the
    bucket reads the first item's text, not its cache_control."""
    def first(marked: list[int]) -> list[object]:
        blocks: list[dict[str, object]] = [
            {"type": "text", "text": "You are a coding agent."},
            {"type": "text", "text": "Fix the failing test."},
        ]
        for n in marked:
            blocks[n]["cache_control"] = {"type": "ephemeral"}
        rest = convert(ANTHROPIC, session(turns=2))[1:]
        return [{"role": "user", "content": blocks}, *rest]

    buckets = {conversation_bucket(first(marked)) for marked in ([], [0], [1], [0, 1])}
    assert len(buckets) == 1
    ttl = first([1])
    ttl[0]["content"][1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}  # type: ignore[index]
    assert conversation_bucket(ttl) in buckets
    # The text does count: other first messages land in other buckets.
    others = {conversation_bucket([{"role": "user", "content": f"Task {n}"}]) for n in range(50)}
    assert len(others) > 10


def test_about_a_tenth_of_conversations_are_held_out_at_10_percent():
    held = sum(
        held_out(convert(fmt, [Say("user", f"Issue {n}: the build fails on {n % 7}"),
                               *session(turns=1)[1:]]), 10)
        for n in range(2000)
        for fmt in [(CHAT, ANTHROPIC, RESPONSES)[n % 3]]
    )
    assert 0.07 * 2000 <= held <= 0.13 * 2000


# The settings ------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value"), [
    ("price_model", "claude"),
    ("price_model", "Anthropic"),
    ("price_model", ""),
    ("holdout_percent", 101),
    ("holdout_percent", -1),
    ("allowance_percent", 101),
    ("allowance_percent", -1),
])
def test_a_wrong_price_model_or_percentage_is_refused_naming_its_key(key, value):
    with pytest.raises(SettingError) as raised:
        MaskPolicy(**{key: value})
    assert raised.value.key == key and key in str(raised.value)
    with pytest.raises(SettingError) as from_file:
        check_value(MaskPolicy, key, value)
    assert from_file.value.key == key


def test_the_largest_percentages_and_every_price_model_are_accepted():
    for model in ("anthropic", "openai", "openai_50", "none"):
        assert MaskPolicy(price_model=model).price_model == model
    policy = MaskPolicy(allowance_percent=100, holdout_percent=100)
    assert (policy.allowance_percent, policy.holdout_percent) == (100, 100)


def test_an_unknown_price_model_error_lists_the_known_ones():
    with pytest.raises(SettingError, match="anthropic, openai, openai_50, none"):
        MaskPolicy(price_model="gpt")


# What the flow says ------------------------------------------------------------------------


def chat_body(events: list[Event]) -> bytes:
    return json.dumps({"model": "m", "messages": convert(CHAT, events)}).encode()


def test_a_held_out_request_goes_out_unchanged_and_says_why():
    events = first_message_in_bucket(5)
    body = chat_body(events)
    assert isinstance(mask_request_body(body, MaskPolicy(window_turns=1)), Masked)
    outcome = mask_request_body(body, MaskPolicy(window_turns=1, holdout_percent=6))
    assert isinstance(outcome, Unchanged) and outcome.reason == HELD_OUT
    assert outcome.plan is not None and outcome.plan.held_out
    meta = LeftAlone.unchanged("chat", outcome.reason, outcome.plan).as_metadata()
    assert meta["action"] == "unchanged" and meta["holdout"] is True
    assert meta["reason"] == HELD_OUT


def test_an_unchanged_request_carries_the_bill_and_no_holdout_key():
    events = conversation([SMALL, SMALL])
    outcome = mask_request_body(chat_body(events), MaskPolicy(**SHIPPED))
    assert isinstance(outcome, Unchanged) and outcome.reason == "nothing to mask"
    meta = LeftAlone.unchanged("chat", outcome.reason, outcome.plan).as_metadata()
    assert "holdout" not in meta
    bill = meta["bill"]
    assert isinstance(bill, dict)
    assert bill["price_model"] == "anthropic" and bill["requests"] == 3
    assert bill["ratio"] == 1.0 and bill["allowance_used"] == 0.0
    # Without a cache there is no bill to show.
    plain = mask_request_body(chat_body(events), MaskPolicy(window_turns=5))
    assert isinstance(plain, Unchanged)
    assert "bill" not in LeftAlone.unchanged("chat", plain.reason, plain.plan).as_metadata()


def test_a_held_out_request_of_a_priced_conversation_carries_the_bill_too():
    """README: the bill is on every request's metadata, and a held-out
    conversation is the group whose bills are compared with the others: the
    ledger's estimate (without masking = what was sent) belongs there too."""
    events = first_message_in_bucket(5)
    outcome = mask_request_body(chat_body(events), MaskPolicy(**SHIPPED, holdout_percent=6))
    assert isinstance(outcome, Unchanged) and outcome.reason == HELD_OUT
    meta = LeftAlone.unchanged("chat", outcome.reason, outcome.plan).as_metadata()
    assert meta["holdout"] is True
    bill = meta["bill"]
    assert isinstance(bill, dict) and bill["requests"] == 5
    # Nothing is masked: both bills are the bill of what was sent.
    assert bill["estimated_with_masking"] == bill["estimated_without_masking"] > 0


# Found while writing these tests: each fails until the code is fixed -----------------------


SHORT_SESSIONS = {
    # 60 lines of output a turn, after a 12-character prompt.
    "session": session(turns=8),
    # 600 characters of output a turn, after a 1,500-character prompt.
    "small_results": conversation(["r" * 600] * 8, prompt="p" * 1500, text="t"),
}


@pytest.mark.parametrize("turns", range(1, 9))
@pytest.mark.parametrize("name", sorted(SHORT_SESSIONS))
def test_the_shipped_settings_keep_the_bill_so_far_within_2_percent_of_a_short_session(
        name, turns):
    """With the shipped settings the bill so far stays within 2% on short
    sessions. small_results is the case that once broke it (1.305x after 5
    turns): a move made while both requests were under Anthropic's
    1024-token minimum left the masked one under it once the original was
    read from the cache; no move may now take a request under the minimum."""
    events = SHORT_SESSIONS[name]
    plan = plan_of(after_turns(events, turns), **SHIPPED)
    assert within_allowance(plan, 2)


def test_between_two_moves_a_masked_request_costs_no_more_than_the_original():
    """Under OpenAI's prices the cache serves the shared prefix in steps of
    128 tokens, so a masked request can be read up to 127 tokens less than
    the original: no move is made until masking has freed enough that the
    reads it saves pay for that (``smallest_saving``), and from then on a
    masked request between two moves never costs more than the original."""
    events = conversation([SMALL] * 4 + [BIG, SMALL, SMALL])
    policy = {"window_turns": 1, "price_model": "openai", "allowance_percent": 0}
    before, after = (plan_of(after_turns(events, t), **policy) for t in (5, 6))
    assert before.frontier_turn == after.frontier_turn  # no move in between
    assert before.bill is not None and after.bill is not None
    masked_cost = after.bill.with_masking - before.bill.with_masking
    plain_cost = after.bill.without_masking - before.bill.without_masking
    assert masked_cost <= plain_cost
    assert within_allowance(after, 0)


@pytest.mark.xfail(strict=True, reason=(
    "Known gap: the ledger counts the results keep_last_k_per_tool keeps as masked, "
    "so with that rule on its bill is optimistic"))
def test_with_keep_last_k_per_tool_the_forwarded_requests_stay_within_the_allowance():
    """FAILS at the 6th request: 38,049.65 re-billed against 34,917.1 sent
    (1.09x; the ledger says 32,917.0). c0 is the last "read" result, kept by
    keep_last_k_per_tool while the frontier passes turn 0 (the ledger counts
    it as masked from then on); when the next "read" result passes the
    frontier, c0 is masked, five turns behind the frontier, and everything
    after it is billed again, which the ledger never sees."""
    tools = ["read", "bash", "bash", "bash", "read", "bash", "bash"]
    events = conversation([BIG] * 4 + [MEDIUM] * 3, text="t" * 200, tools=tools)
    policy = MaskPolicy(keep_last_k_per_tool=1, **SHIPPED)
    sent_items = [convert(CHAT, after_turns(events, t)) for t in range(0, 8)]
    forwarded_items = [mask_items(items, policy, CHAT) for items in sent_items]
    sent = so_far(rebill(sent_items, "anthropic"))
    forwarded = so_far(rebill(forwarded_items, "anthropic"))
    for n, (plain, masked) in enumerate(zip(sent, forwarded, strict=True), start=1):
        # One uncached token a request for the rounding of characters / 4.
        assert masked <= plain * 1.02 + 1250 * n, f"request {n}: {masked / 1000} > {plain / 1000}"


@pytest.mark.xfail(strict=True, reason=(
    "Known gap: the clipping stage (max_input_tokens) is not part of the ledger's "
    "replay"))
def test_a_result_clipped_by_max_input_tokens_is_not_sent_in_full_again():
    """FAILS: after 5 turns the request is over max_input_tokens and c0 to c3
    (older than the window, waiting for the frontier) are clipped; after 6
    turns the frontier masks c4 and keeps c0 to c3 for the cache, and the
    clip stage no longer touches turns behind the frontier: they go out in
    full again. Their bytes change twice (two re-billings the ledger never
    counts) and the request grows back by what clipping had cut."""
    events = conversation([MEDIUM] * 4 + [BIG, MEDIUM])
    policy = {**SHIPPED, "max_input_tokens": 10_000, "clip_head_chars": 200,
              "clip_tail_chars": 100}
    clipped = plan_of(after_turns(events, 5), **policy)
    assert {d.call_id for d in clipped.decisions if d.kind == CLIPPED} == {"c0", "c1", "c2", "c3"}
    later = plan_of(after_turns(events, 6), **policy)
    assert {d.call_id for d in later.decisions} >= {"c0", "c1", "c2", "c3"}


def test_conversations_that_begin_with_the_same_system_prompt_are_not_all_in_one_group():
    """FAILS: 0 of 2,000 held out (or all of them, for another prompt).
    A Chat Completions (or Responses) client sends its system (developer)
    message first, the same for all its conversations: the bucket is the
    hash of that message alone, so holdout_percent holds out all of an
    agent's conversations or none, never a share of them."""
    held = sum(
        held_out(convert(CHAT, [Say("system", "You are a coding agent."),
                                Say("user", f"Issue {n}: the build fails on {n % 7}"),
                                *session(turns=1)[1:]]), 10)
        for n in range(2000)
    )
    assert 0.07 * 2000 <= held <= 0.13 * 2000
