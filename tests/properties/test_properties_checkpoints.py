"""Property-based tests of the frontier's checkpoints: a request whose replay
resumes from an earlier request's checkpoint gets exactly the plan a full
replay gives, whatever order the requests come in (retries, several agents
with the same start, a history the client edited), in every format and
under every price model; and a conversation that grows one request at a
time does resume."""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.frontier.frontier import Frontier
from obsmask_core.conversation.planning.memory import PlanMemory
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from support.conversation_strategies import growing_conversations, requests_of
from support.conversation_strategies import priced_policies as policies
from support.formats import Call, Event, Result, Turn, convert
from support.resumed_replays import edited, same_plan

formats = st.sampled_from([CHAT, ANTHROPIC, RESPONSES])


def replayed_in_full(fmt: WireFormat, items: list[object], policy: MaskPolicy,
                     recall: bool) -> MaskPlan:
    # Without a memory: every result judged afresh, the frontier replayed in full.
    return plan_masking(fmt.index(items), policy, items, recall=recall)


def with_reused_ids(events: list[Event]) -> list[Event]:
    """The conversation as clients that number calls within each turn send
    it (``call_0`` in every turn): with recall, an old result stops being
    recallable once a later one shares its id, and is judged anew."""
    renamed: dict[object, str] = {}
    out: list[Event] = []
    for event in events:
        if isinstance(event, Turn):
            calls = []
            for n, call in enumerate(event.calls):
                renamed[call.id] = f"call_{n}"
                calls.append(Call(f"call_{n}", call.name))
            out.append(Turn(calls, event.text))
        elif isinstance(event, Result):
            out.append(Result(renamed.get(event.call_id, event.call_id), event.content,
                              event.is_error, event.extra))
        else:
            out.append(event)
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=growing_conversations(), policy=policies, fmt=formats, recall=st.booleans(),
       reused_ids=st.booleans(), data=st.data())
def test_a_resumed_replay_plans_what_a_full_replay_plans(events, policy, fmt, recall,
                                                         reused_ids, data):
    """Requests of one conversation sent in any order, some twice, some
    with an item edited, ids unique or reused: each plan equals the full
    replay's."""
    memory = PlanMemory()
    if reused_ids:
        events = with_reused_ids(events)
    requests = [convert(fmt, request) for request in requests_of(events)]
    order = data.draw(st.lists(st.integers(0, len(requests) - 1), min_size=1, max_size=12))
    for number in order:
        items = requests[number]
        if data.draw(st.integers(0, 4)) == 0 and len(items) > 1:
            items = edited(items, data.draw(st.integers(0, len(items) - 1)))
        resumed = plan_masking(fmt.index(items), policy, items, recall=recall, memory=memory)
        same_plan(resumed, replayed_in_full(fmt, items, policy, recall))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=growing_conversations(), policy=policies, fmt=formats)
def test_a_conversation_sent_in_order_resumes_from_its_previous_request(events, policy, fmt):
    """The checkpoints are used: past its first request, every request of a
    conversation sent in order resumes, and still plans as a full replay."""
    memory = PlanMemory()
    requests = [convert(fmt, request) for request in requests_of(events)]
    requests = [items for items in requests if items]
    restored = mock.Mock(wraps=Frontier._restore, autospec=True)
    with mock.patch.object(Frontier, "_restore", lambda self, resume: restored(self, resume)):
        for items in requests:
            resumed = plan_masking(fmt.index(items), policy, items, memory=memory)
            same_plan(resumed, replayed_in_full(fmt, items, policy, False))
    assert restored.call_count == len(requests) - 1
