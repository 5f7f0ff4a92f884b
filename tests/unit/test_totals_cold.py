"""Cold turns in the totals (``totals/cold.py``): the requests that came back
after the provider's cache had expired are counted apart, with what masking
saved on them by the ledger's estimate, beside the warm ones; per run and
per conversation, in the JSON, the end-of-run summary (only once a cold
turn was seen) and the metrics. A wrong value in a flow file counts as
absent."""

from __future__ import annotations

import pytest

from obsmask_core.totals.metrics import Metrics
from obsmask_core.totals.totals import Totals

Json = dict[str, object]


def request(conversation: str, *, cold: object, with_masking: object,
            without_masking: object, tokens: tuple[int, int] = (900, 100)) -> Json:
    return {"action": "masked", "format": "anthropic", "conversation": conversation,
            "masked_tool_results": 1, "tool_results": 4,
            "masked_tokens_before": tokens[0], "masked_tokens_after": tokens[1],
            "bill": {"price_model": "anthropic", "requests": 3,
                     "estimated_with_masking": 10.0, "estimated_without_masking": 12.0,
                     "cold": cold,
                     "request": {"estimated_with_masking": with_masking,
                                 "estimated_without_masking": without_masking}}}


def added(*flows: Json) -> Totals:
    totals = Totals()
    for flow in flows:
        totals.add_flow(flow, None)
    return totals


def run_of(totals: Totals) -> Json:
    run = totals.as_json()["requests"]
    assert isinstance(run, dict)
    return run


def test_the_saving_on_cold_turns_is_summed_apart_from_the_saving_on_warm_ones():
    totals = added(
        request("c-a", cold=False, with_masking=1000.0, without_masking=1100.0),
        request("c-a", cold=True, with_masking=5000.0, without_masking=8000.0),
        request("c-a", cold=False, with_masking=900.0, without_masking=850.0),
        request("c-b", cold=False, with_masking=200.0, without_masking=250.0,
                tokens=(50, 10)))
    turns = run_of(totals)["cold_turns"]
    assert turns == {
        "cold": {"requests": 1, "estimated_with_masking": 5000.0,
                 "estimated_without_masking": 8000.0, "estimated_saved": 3000.0,
                 "tokens_saved": 800},
        "warm": {"requests": 3, "estimated_with_masking": 2100.0,
                 "estimated_without_masking": 2200.0, "estimated_saved": 100.0,
                 "tokens_saved": 1640},
        "cold_share_of_saving": round(3000 / 3100, 4)}
    conversations = totals.as_json()["conversations"]
    assert isinstance(conversations, dict)
    assert conversations["c-b"]["cold_turns"]["cold"]["requests"] == 0
    assert any("cold turns: 1 request(s) came back after the cache's lifetime and saved "
               "3,000 estimated tokens; 3 warm one(s) saved 100 (97% of the saving on cold "
               "turns)" in line for line in totals.summary_lines())
    exposition = Metrics(totals).exposition().decode()
    assert 'obsmask_turn_requests_total{turn="cold"} 1.0' in exposition
    assert 'obsmask_turn_requests_total{turn="warm"} 3.0' in exposition
    assert 'obsmask_turn_saved_tokens{turn="cold"} 3000.0' in exposition
    assert 'obsmask_turn_saved_tokens{turn="warm"} 100.0' in exposition


def test_no_summary_line_while_no_request_came_back_cold():
    totals = added(request("c-a", cold=False, with_masking=1.0, without_masking=2.0))
    assert not any("cold turns" in line for line in totals.summary_lines())
    assert run_of(totals)["cold_turns"]["cold_share_of_saving"] == 0.0


@pytest.mark.parametrize(("with_masking", "without_masking"),
                         [("cheap", 1.0), (1.0, None), (True, 2.0), (float("nan"), 1.0)])
def test_a_request_whose_own_cost_cannot_be_read_counts_in_neither(with_masking,
                                                                    without_masking):
    totals = added(request("c-a", cold=True, with_masking=with_masking,
                           without_masking=without_masking))
    turns = run_of(totals)["cold_turns"]
    assert isinstance(turns, dict)
    assert turns["cold"]["requests"] == 0 == turns["warm"]["requests"]
    assert turns["cold_share_of_saving"] is None


def test_only_a_cold_value_of_true_makes_a_request_cold():
    totals = added(request("c-a", cold="yes", with_masking=1.0, without_masking=2.0))
    turns = run_of(totals)["cold_turns"]
    assert isinstance(turns, dict)
    assert turns["cold"]["requests"] == 0 and turns["warm"]["requests"] == 1
