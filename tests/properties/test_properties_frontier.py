"""Property-based test of the frontier: a conversation grown one request at a
time is masked monotonically (a result masked once stays masked, with the
same bytes), and the masked prefix up to the frontier does not change while
the frontier stays put, whatever the cache-aware and budget settings."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.planning.planner import MASKED, plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES
from support.chat import LONG_OUTPUT
from support.formats import Call, Event, Result, Say, Turn, convert, result_values, skeleton
from support.planning import DISPATCH

policies = st.builds(
    MaskPolicy,
    refetch_guard=st.booleans(),
    window_turns=st.integers(1, 4),
    keep_errors=st.booleans(),
    keep_last_k_per_tool=st.integers(0, 2),
    batch_turns=st.integers(1, 4),
    trigger_tokens=st.sampled_from([0, 500, 3000]),
    min_chars=st.sampled_from([0, 300, 2000]),
    exclude_tools=st.sampled_from([(), ("read",)]),
    min_free_percent=st.sampled_from([0, 20, 80]),
    max_input_tokens=st.sampled_from([0, 1500, 4000]),
    clip_head_chars=st.just(200),
    clip_tail_chars=st.just(100),
)


outputs = st.sampled_from([
    "ok", LONG_OUTPUT, "x" * 4000, "Traceback (most recent call last):\n  x\nKeyError: 1\n" * 20,
    "noise " * 100 + DISPATCH,
])


call_arguments = st.sampled_from([
    {"c": 1}, {"c": 2}, {"command": "cat a"}, {"command": "sed -i s/x/y/ a"},
])


@st.composite
def growing_conversations(draw: st.DrawFn) -> list[Event]:
    events: list[Event] = [Say("user", "go")]
    for turn in range(draw(st.integers(1, 14))):
        # Arguments from a few, so that calls repeat (re-fetches, with and
        # without a change in between) and differ.
        calls = [Call(f"c{turn}_{n}", draw(st.sampled_from(["bash", "read"])),
                      draw(call_arguments))
                 for n in range(draw(st.integers(1, 2)))]
        events.append(Turn(calls, text=draw(st.sampled_from(["t", "thinking " * 30]))))
        events.extend(Result(call.id, draw(outputs)) for call in calls)
        if draw(st.integers(0, 3)) == 0:
            # A model answer without tool calls, and the user's reply: a
            # request of its own, between two tool turns.
            events += [Say("assistant", "Here is what I found. " * draw(st.integers(1, 60))),
                       Say("user", "go on")]
    return events


def requests_of(events: list[Event]) -> list[list[Event]]:
    """Every request of the conversation: each prefix that ends before a
    model answer (with or without tool calls), then the whole of it."""
    return [
        events[:i]
        for i, e in enumerate(events)
        if isinstance(e, Turn) or (isinstance(e, Say) and e.role == "assistant")
    ] + [events]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=growing_conversations(), policy=policies)
def test_growing_conversation_is_masked_monotonically(events, policy):
    """For a conversation grown one request at a time, masking is monotone, the
    serialised masked prefix up to the frontier is unchanged whenever the
    frontier did not move, and the invariants of masking (same items, same
    ids and calls, only results' values change) hold with every setting."""
    for fmt in (CHAT, ANTHROPIC, RESPONSES):
        previous = None
        for request in requests_of(events):
            items = convert(fmt, request)
            plan = plan_masking(fmt.index(items), policy, items)
            after = mask_items(items, policy, fmt)
            assert len(after) == len(items) and skeleton(fmt, after) == skeleton(fmt, items)
            values = dict(result_values(fmt, after))
            masked_now = {d.call_id: values[d.call_id] for d in plan.decisions
                          if d.kind == MASKED}
            if previous is not None:
                old_masked, old_frontier, old_after, old_index = previous
                # Monotone: masked once, masked again, with the same bytes.
                for call_id, value in old_masked.items():
                    assert masked_now.get(call_id) == value
                assert plan.frontier_turn >= old_frontier
                if plan.frontier_turn == old_frontier:
                    turns = old_index.turns
                    end = (turns[old_frontier].location[0] if old_frontier < len(turns)
                           else len(old_after))
                    assert json.dumps(after[:end]) == json.dumps(old_after[:end])
            previous = (masked_now, plan.frontier_turn, after, fmt.index(items))
