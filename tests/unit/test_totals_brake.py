"""The provider's brake in the totals (``totals/brake.py``): each weighed
answer's surprise summed, the answers that braked a conversation and the
requests planned braked counted, per conversation and per run; in the
JSON, the summary (only when a conversation was braked) and the metrics.
A wrong value in a flow file counts as absent."""

from __future__ import annotations

import pytest

from obsmask_core.totals.metrics import Metrics
from obsmask_core.totals.totals import Totals

Json = dict[str, object]


def request(conversation: str, brake: object = None) -> Json:
    facts: Json = {"action": "masked", "format": "anthropic", "conversation": conversation,
                   "masked_tool_results": 1, "tool_results": 4}
    if brake is not None:
        facts["brake"] = brake
    return facts


def added(*flows: Json) -> Totals:
    totals = Totals()
    for flow in flows:
        totals.add_flow(flow, None)
    return totals


def test_weighed_answers_are_summed_per_run_and_per_conversation():
    totals = added(
        request("c-a", {"surprise": 0.0, "conversation_surprise": 0.0, "room": 50.0}),
        request("c-a", {"surprise": 120.5, "conversation_surprise": 120.5, "room": 60.0,
                        "braked_from": 12, "tripped": True}),
        request("c-a", {"surprise": 0.0, "conversation_surprise": 120.5, "room": 70.0,
                        "braked_from": 12}),
        request("c-b", {"surprise": -10.0, "conversation_surprise": -10.0, "room": 5.0}),
        request("c-b"))
    run = totals.as_json()["requests"]
    assert isinstance(run, dict)
    assert run["provider_brake"] == {"answers_weighed": 4, "surprise_tokens": 110.5,
                                     "conversations_braked": 1, "braked_requests": 1}
    conversations = totals.as_json()["conversations"]
    assert isinstance(conversations, dict)
    assert conversations["c-a"]["provider_brake"]["conversations_braked"] == 1
    assert conversations["c-b"]["provider_brake"]["surprise_tokens"] == -10.0
    assert any("provider brake: 1 conversation(s) stopped, 1 request(s) planned braked"
               in line for line in totals.summary_lines())
    exposition = Metrics(totals).exposition().decode()
    assert "obsmask_provider_brakes_total 1.0" in exposition
    assert "obsmask_provider_braked_requests_total 1.0" in exposition
    assert "obsmask_provider_surprise_tokens 110.5" in exposition


def test_no_summary_line_while_no_conversation_was_braked():
    totals = added(request("c-a", {"surprise": 3.0}))
    assert not any("provider brake" in line for line in totals.summary_lines())


@pytest.mark.parametrize("brake", ["braked", 3, {"surprise": "lots"}, {"surprise": True},
                                   {"room": 4}])
def test_a_wrong_brake_value_counts_as_absent(brake):
    run = added(request("c-a", brake)).as_json()["requests"]
    assert isinstance(run, dict)
    assert run["provider_brake"] == {"answers_weighed": 0, "surprise_tokens": 0.0,
                                     "conversations_braked": 0, "braked_requests": 0}
