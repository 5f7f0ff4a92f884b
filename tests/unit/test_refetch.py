"""Re-fetches (``conversation/frontier/refetch.py``): a call the model makes again,
with the same tool and arguments, after the earlier call's result was
masked in the request it answered, and with nothing in between that may
have changed what it reads. Natural repeats (the earlier result still in
view, or a change in between) are not re-fetches. The guard keeps the
results of a re-fetched call, and of every later call that is the same."""

from __future__ import annotations

import gc

import pytest

from obsmask_core.conversation.frontier.refetch import RefetchWatch, count_repeats
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from obsmask_core.shared.refetch_facts import RefetchFacts
from support.formats import LONG_OUTPUT, Call, Event, Result, Say, Turn, convert
from support.planning import plan_of

FORMATS = [CHAT, ANTHROPIC, RESPONSES]


def read(call_id: str, path: str, name: str = "read_file") -> list[Event]:
    return [Turn([Call(call_id, name, {"path": path})]),
            Result(call_id, f"{LONG_OUTPUT}\n({path}, {call_id})")]


def run(call_id: str, command: str) -> list[Event]:
    return [Turn([Call(call_id, "bash", {"command": command})]),
            Result(call_id, f"{LONG_OUTPUT}\n({command}, {call_id})")]


def conversation(*steps: list[Event]) -> list[Event]:
    events: list[Event] = [Say("user", "Fix the bug.")]
    for step in steps:
        events.extend(step)
    return events


def plan(fmt: WireFormat, events: list[Event], **policy: object) -> MaskPlan:
    return plan_of(events, fmt, window_turns=1, **policy)


REREAD = conversation(read("r1", "a.py"), read("r2", "b.py"), read("r3", "c.py"),
                      read("r4", "a.py"))


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_reading_again_a_file_whose_result_was_masked_is_a_refetch(fmt):
    refetches = plan(fmt, REREAD).refetches
    assert refetches.new_calls == ("r4",)
    assert refetches.new_tools == (("read_file", 1),)
    assert refetches.in_conversation == 1
    # The answer held nothing else: a model turn the agent would not have needed.
    assert refetches.extra_turns == 1
    assert refetches.result_tokens == -(-len(f"{LONG_OUTPUT}\n(a.py, r4)") // 4)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_a_refetch_is_new_only_in_the_request_that_answers_it(fmt):
    later = REREAD + read("r5", "d.py")
    refetches = plan(fmt, later).refetches
    assert refetches.in_conversation == 1 and refetches.new_calls == ()


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_reading_again_a_result_still_in_view_is_no_refetch(fmt):
    assert not plan_of(REREAD, fmt, window_turns=4).refetches
    # Nor when masking is off.
    assert not plan_of(REREAD, fmt, window_turns=1, enabled=False).refetches


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_a_repeat_after_a_change_in_between_is_no_refetch(fmt):
    events = conversation(read("r1", "a.py"), read("r2", "b.py"),
                          run("e1", "sed -i 's/x/y/' a.py"), read("r3", "a.py"))
    assert not plan(fmt, events).refetches
    # A plain read in between changes nothing: the same repeat is a re-fetch.
    events = conversation(read("r1", "a.py"), read("r2", "b.py"), run("e1", "cat b.py"),
                          read("r3", "a.py"))
    assert plan(fmt, events).refetches.new_calls == ("r3",)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_the_same_call_with_its_keys_in_another_order_is_a_refetch(fmt):
    first = Turn([Call("g1", "grep", {"pattern": "foo", "path": "src"})])
    again = Turn([Call("g2", "grep", {"path": "src", "pattern": "foo"})])
    events = conversation([first, Result("g1", LONG_OUTPUT)], read("r1", "b.py"),
                          read("r2", "c.py"), [again, Result("g2", LONG_OUTPUT)])
    assert plan(fmt, events).refetches.new_calls == ("g2",)


def test_a_refetch_made_with_other_calls_in_its_answer_costs_no_extra_turn():
    events = conversation(read("r1", "a.py"), read("r2", "b.py"), read("r3", "c.py"),
                          [Turn([Call("r4", "read_file", {"path": "a.py"}),
                                 Call("r5", "read_file", {"path": "d.py"})]),
                           Result("r4", LONG_OUTPUT), Result("r5", LONG_OUTPUT)])
    refetches = plan(CHAT, events).refetches
    assert refetches.new_calls == ("r4",) and refetches.extra_turns == 0


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_without_the_guard_a_refetched_result_is_masked_again(fmt):
    events = REREAD + read("r5", "d.py") + read("r6", "e.py")
    result = plan(fmt, events)
    assert result.kept["refetched"] == 0
    assert "r4" in {d.call_id for d in result.decisions}


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_the_guard_keeps_the_results_of_a_refetched_call_and_of_the_same_call_later(fmt):
    events = REREAD + read("r5", "d.py") + read("r6", "a.py") + read("r7", "e.py")
    result = plan(fmt, events, refetch_guard=True)
    masked = {d.call_id for d in result.decisions}
    assert "r4" not in masked and "r6" not in masked
    assert result.kept["refetched"] == 2
    # The earlier result stays masked (nothing masked is ever restored), and
    # reads of other files are masked as before.
    assert {"r1", "r2", "r3", "r5"} <= masked
    # r6 read the file while r4's result was still there: a repeat, not a re-fetch.
    assert result.refetches.in_conversation == 1
    assert result.refetches.guarded_results == 2


def test_the_guard_leaves_every_request_before_the_refetch_as_it_was():
    """The guard decides from what the model did after a result was masked:
    the requests before the re-fetch are planned as without it."""
    steps = [read("r1", "a.py"), read("r2", "b.py"), read("r3", "c.py")]
    events = conversation(*steps)
    assert plan(CHAT, events, refetch_guard=True).decisions == plan(CHAT, events).decisions


def test_clients_that_reuse_call_ids_have_their_refetches_found_by_turn():
    events = conversation(read("call_0", "a.py"), read("call_0", "b.py"),
                          read("call_0", "c.py"), read("call_0", "a.py"),
                          read("call_0", "d.py"), read("call_0", "e.py"))
    result = plan(CHAT, events, refetch_guard=True)
    assert result.refetches.in_conversation == 1
    assert result.kept["refetched"] == 1


def test_every_repeat_is_counted_after_a_change_or_with_nothing_changed():
    """The baseline of natural repeats: with nothing masked, each repeat of a
    call is counted once, apart by whether a call in between may have
    changed what it reads."""
    events = conversation(read("r1", "a.py"), read("r2", "a.py"),
                          run("e1", "sed -i 's/x/y/' a.py"), read("r3", "a.py"),
                          run("t1", "cat b.py"), read("r4", "b.py"))
    for fmt in FORMATS:
        items = convert(fmt, events)
        counts = count_repeats(fmt.index(items), items)
        assert counts.calls == 6
        assert (counts.repeats_seen, counts.repeats_after_change) == (1, 1)
        assert counts.refetches == ()


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_what_a_request_writes_of_its_refetches_reads_back_the_same(fmt):
    """One value object: the flow's metadata is its ``as_metadata``, and the
    totals, the view and the report read that back to an equal one."""
    events = REREAD + read("r5", "d.py") + read("r6", "a.py")
    for policy in ({}, {"refetch_guard": True}):
        facts = plan(fmt, events, **policy).refetches
        assert facts
        assert RefetchFacts.read(facts.as_metadata()) == facts


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_what_a_checkpoint_keeps_of_the_calls_the_collector_stops_walking(fmt):
    """Every checkpoint keeps the calls its replay read and the latest call
    of each key: plain tuples of plain values, which the garbage collector
    leaves out of its walks once it has looked at them (a named tuple it
    walks in every full collection for as long as it lives)."""
    items = convert(fmt, REREAD + run("b1", "ls") + read("r5", "d.py"))
    watch = RefetchWatch(fmt.index(items), items, guard=True)
    watch.read_up_to(len(items), lambda turn, call_id: False)
    state = watch.state()
    gc.collect()
    calls = [call for turn in state.readings for call in turn]
    assert len(calls) == 6 and len(state.seen) == 5
    assert not any(gc.is_tracked(kept) for kept in [*calls, *state.seen.values()])
    # A turn's tuple of calls goes at the next collection that finds its
    # calls gone.
    gc.collect()
    assert not any(gc.is_tracked(turn) for turn in state.readings)
