"""Hypothesis strategies for conversations that grow one request at a time,
and for the settings they are masked under, shared by the property tests
of the frontier, its checkpoints, its ledger and its re-fetches."""

from __future__ import annotations

from hypothesis import strategies as st

from obsmask_core.conversation.billing.price_models import PRICE_MODELS
from obsmask_core.conversation.settings.policy import MaskPolicy
from support.chat import LONG_OUTPUT
from support.formats import Call, Event, Result, Say, Turn
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

# Settings under every price model and allowance, with fewer of the other
# knobs: what the checkpoint tests replay under.
priced_policies = st.builds(
    MaskPolicy,
    refetch_guard=st.booleans(),
    window_turns=st.integers(1, 4),
    batch_turns=st.integers(1, 3),
    trigger_tokens=st.sampled_from([0, 500, 3000]),
    min_chars=st.sampled_from([0, 300]),
    min_free_percent=st.sampled_from([0, 20, 80]),
    max_input_tokens=st.sampled_from([0, 4000]),
    keep_last_k_per_tool=st.integers(0, 1),
    price_model=st.sampled_from(sorted(PRICE_MODELS)),
    allowance_percent=st.sampled_from([0, 2, 10]),
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
