"""Where the masking frontier stands (``conversation/frontier/frontier.py``):
``batch_turns`` moves it in steps, ``trigger_tokens`` holds it until the
request is big enough, ``min_free_percent`` until a move frees enough of what
it makes the provider bill again; each rule judged turn by turn on the
conversation as it was, so every later request agrees about the past."""

from __future__ import annotations

import json

from obsmask_core.conversation.turns.wire_formats import CHAT
from support.formats import Call, Event, Result, Say, Turn, convert, session
from support.planning import masked_ids, plan_of

# batch_turns -------------------------------------------------------------------------


def test_batch_turns_moves_the_frontier_in_steps():
    """With batch_turns the masking frontier moves in steps of that many tool
    turns, so the masked prefix stays byte-identical between moves."""
    frontiers = [plan_of(session(turns=t), window_turns=2, batch_turns=3).frontier_turn
                 for t in range(1, 13)]
    assert frontiers == [0, 0, 0, 0, 3, 3, 3, 6, 6, 6, 9, 9]
    # 1 is the plain sliding window.
    assert [plan_of(session(turns=t), window_turns=2).frontier_turn for t in range(1, 7)] == [
        0, 0, 1, 2, 3, 4,
    ]


def test_results_waiting_for_the_frontier_are_reported_as_pending():
    plan = plan_of(session(turns=8), window_turns=2, batch_turns=4)
    assert plan.frontier_turn == 4 and plan.masked == 4
    assert plan.kept["pending"] == 2 and plan.kept["in_window"] == 2


# trigger_tokens ------------------------------------------------------------------------


def test_trigger_tokens_masks_nothing_below_the_trigger():
    """Nothing is masked while the request's estimated input is below
    trigger_tokens."""
    events = session(turns=6)
    size = sum(len(json.dumps(m)) for m in convert(CHAT, events)) // 4
    assert masked_ids(events, window_turns=2, trigger_tokens=size * 2) == []
    assert len(masked_ids(events, window_turns=2, trigger_tokens=size // 2)) == 4 - 0


def test_trigger_is_replayed_turn_by_turn():
    """The frontier only moves at turns where the request was over the
    trigger, so later requests agree with earlier ones about the past."""
    events = session(turns=10)
    size_at = [sum(len(json.dumps(m)) for m in convert(CHAT, session(turns=t))) // 4
               for t in range(1, 11)]
    trigger = size_at[6]  # reached at turn 7
    plan = plan_of(events, window_turns=1, trigger_tokens=trigger)
    assert plan.frontier_turn == 9


# min_free_percent ------------------------------------------------------------------------


def test_a_move_must_free_enough_of_what_it_rebills():
    """A move re-bills everything after the first newly masked result; with
    min_free_percent it waits until the masked results are worth it."""
    small, big = "s" * 300, "B" * 20_000
    events: list[Event] = [Say("user", "go")]
    for turn in range(6):
        events += [Turn([Call(f"c{turn}")], text="t"),
                    Result(f"c{turn}", big if turn == 4 else small)]

    def frontiers(**policy: object) -> list[int]:
        return [plan_of(events[: 1 + 2 * t], window_turns=1, **policy).frontier_turn
                for t in range(1, 7)]

    assert frontiers() == [0, 1, 2, 3, 4, 5]
    # Masking c0 alone frees ~175 of ~700 re-billed chars (25%): wait. c0+c1
    # free 350 of ~1000 (over 50% of what stays): move. Then c2, c3 would
    # re-bill the 20 kB result c4 for ~350 chars freed: wait, until c4 itself
    # can go.
    assert frontiers(min_free_percent=50) == [0, 0, 2, 2, 2, 5]
