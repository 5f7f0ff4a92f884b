"""Property-based tests of re-fetch detection, against an oracle written
from the rule alone: a call is a re-fetch exactly when the latest earlier
call with the same tool and arguments had its result masked in the request
the model answered with the new call (that request planned on its own), and
no call in between may have changed anything. In every wire format, with
the guard on and off, and under every price model."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.planning.plan import MASKED, MaskPlan
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from support.conversation_strategies import growing_conversations, policies
from support.formats import Call, Event, Say, Turn, convert

# The per-tool rule follows the frontier's last move, not the request the
# model answered: detection does not model it (a known approximation).
refetch_policies = policies.map(lambda policy: dataclasses.replace(policy,
                                                                  keep_last_k_per_tool=0))
formats = st.sampled_from([CHAT, ANTHROPIC, RESPONSES])


def planned(fmt: WireFormat, events: list[Event], policy: MaskPolicy) -> MaskPlan:
    items = convert(fmt, events)
    return plan_masking(fmt.index(items), policy, items)


def only_reads(call: Call) -> bool:
    """The generator's calls: "read" reads, and so does ``cat``."""
    arguments = call.arguments_value()
    return call.name == "read" or (isinstance(arguments, dict)
                                   and arguments.get("command") == "cat a")


def is_answer(event: Event) -> bool:
    return isinstance(event, Turn) or (isinstance(event, Say) and event.role == "assistant")


def next_answer(events: list[Event], position: int) -> int:
    """Where the answer after the one at ``position`` begins: the request
    that holds that one and its results ends there."""
    return next((n for n in range(position + 1, len(events)) if is_answer(events[n])),
                len(events))


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events=growing_conversations(), policy=refetch_policies, fmt=formats)
def test_a_refetch_is_a_repeat_whose_earlier_result_the_model_saw_masked(events, policy, fmt):
    seen: list[tuple[str, Call]] = []  # (key, call), oldest first
    total = 0
    for position, event in enumerate(events):
        if not isinstance(event, Turn):
            continue
        answered = planned(fmt, events[:position], policy)
        masked = {d.call_id for d in answered.decisions if d.kind == MASKED}
        expected: list[object] = []
        for call in event.calls:
            key = json.dumps([call.name, call.arguments_value()], sort_keys=True)
            earlier = next((n for n in range(len(seen) - 1, -1, -1) if seen[n][0] == key), None)
            if earlier is not None and all(only_reads(c) for _, c in seen[earlier + 1:]) \
                    and seen[earlier][1].id in masked:
                expected.append(call.id)
            seen.append((key, call))
        total += len(expected)
        refetches = planned(fmt, events[:next_answer(events, position)], policy).refetches
        assert list(refetches.new_calls) == expected
        assert refetches.in_conversation == total


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events=growing_conversations(), policy=refetch_policies, fmt=formats)
def test_the_guard_keeps_the_results_of_a_refetched_call_and_of_the_same_call_later(
        events, policy, fmt):
    """With the guard, the results of a re-fetched call, and of every later
    call that is the same, are never masked; no other result is kept as
    "refetched"."""
    guarded = dataclasses.replace(policy, refetch_guard=True)
    refetched: set[object] = set()
    for position, event in enumerate(events):
        if isinstance(event, Turn):
            refetched.update(planned(fmt, events[:next_answer(events, position)],
                                     guarded).refetches.new_calls)
    keys: dict[object, str] = {}
    first_refetch: dict[str, int] = {}
    order = 0
    for event in events:
        if isinstance(event, Turn):
            for call in event.calls:
                key = json.dumps([call.name, call.arguments_value()], sort_keys=True)
                keys[call.id] = key
                if call.id in refetched:
                    first_refetch.setdefault(key, order)
                order += 1
    order = 0
    protected: set[object] = set()
    for event in events:
        if isinstance(event, Turn):
            for call in event.calls:
                if order >= first_refetch.get(keys[call.id], order + 1):
                    protected.add(call.id)
                order += 1

    items = convert(fmt, events)
    index = fmt.index(items)
    plan = plan_masking(index, guarded, items)
    call_at = {result.location: result.call_id for result in index.results}
    assert not protected & {d.call_id for d in plan.decisions if d.kind == MASKED}
    assert {call_at[location] for location, reason in plan.kept_at.items()
            if reason == "refetched"} <= protected
    assert plan.refetches.guarded_results == sum(
        1 for reason in plan.kept_at.values() if reason == "refetched")
