"""Re-fetches in the totals: each request's new re-fetches added once, per
tool, with the tokens of their results, the extra model turns and the
results the guard kept; in the JSON, the summary (only when there are any)
and the metrics. A wrong value in a flow file counts as absent."""

from __future__ import annotations

import pytest

from obsmask_core.shared.refetch_facts import RefetchFacts
from obsmask_core.totals.metrics import Metrics
from obsmask_core.totals.running_sums import OTHER_TOOLS, TOOLS_KEPT
from obsmask_core.totals.totals import Totals
from support.metrics_text import exposition_values

Json = dict[str, object]


def request(conversation: str, refetches: object = None, *, action: str = "masked") -> Json:
    """A conversation request's metadata, with its ``refetches`` dict if given."""
    facts: Json = {"action": action, "format": "chat", "conversation": conversation,
                   "masked_tool_results": 1, "tool_results": 4}
    if refetches is not None:
        facts["refetches"] = refetches
    return facts


def refetches(calls: list[str], tools: dict[str, int], *, tokens: int = 0, extra: int = 0,
              in_conversation: int = 0, guarded: int = 0) -> Json:
    """The dict as ``RefetchFacts.as_metadata`` writes it."""
    return {"new": len(calls), "new_calls": calls, "new_tools": tools,
            "result_tokens": tokens, "extra_turns": extra,
            "in_conversation": in_conversation or len(calls), "guarded_results": guarded}


def as_dict(value: object) -> dict[str, object]:
    assert isinstance(value, dict)
    return value


def a_conversation_with_three_refetches(totals: Totals) -> None:
    """c-a: a re-fetch of read_file (its answer made nothing else), then one
    of each tool, then a request that only carries the conversation's count
    and the result the guard keeps; c-b: none."""
    totals.add_flow(request("c-a", refetches(["r4"], {"read_file": 1}, tokens=300,
                                             extra=1, guarded=1)), None)
    totals.add_flow(request("c-a", refetches(["r6", "b6"], {"read_file": 1, "bash": 1},
                                             tokens=50, in_conversation=3, guarded=2)), None)
    totals.add_flow(request("c-a", refetches([], {}, in_conversation=3, guarded=2)), None)
    totals.add_flow(request("c-b"), None)


def test_each_refetch_is_counted_once_in_the_request_whose_newest_answer_made_it():
    totals = Totals()
    a_conversation_with_three_refetches(totals)
    r = totals.requests.refetches
    assert (r.calls, dict(r.tools)) == (3, {"read_file": 2, "bash": 1})
    assert (r.result_tokens, r.extra_turns, r.guarded_results) == (350, 1, 5)


def test_the_totals_json_gives_the_refetches_of_the_run_and_of_each_conversation():
    totals = Totals()
    a_conversation_with_three_refetches(totals)
    document = totals.as_json()
    assert as_dict(document["requests"])["refetches"] == {
        "calls": 3, "tools": {"bash": 1, "read_file": 2}, "result_tokens": 350,
        "extra_turns": 1, "guarded_results": 5}
    conversations = as_dict(document["conversations"])
    assert as_dict(as_dict(conversations["c-a"])["refetches"])["calls"] == 3
    assert as_dict(conversations["c-b"])["refetches"] == {
        "calls": 0, "tools": {}, "result_tokens": 0, "extra_turns": 0, "guarded_results": 0}


def test_the_summary_names_the_refetches_and_their_cost_only_when_there_are_some():
    totals = Totals()
    totals.add_flow(request("c-b"), None)
    assert not any("re-fetch" in line for line in totals.summary_lines())
    a_conversation_with_three_refetches(totals)
    assert ("totals: 3 re-fetch(es) of a masked result (bash 1, read_file 2): 350 tokens of "
            "results fetched again, 1 extra model turn(s); 5 result(s) kept by the guard"
            ) in totals.summary_lines()


def test_results_the_guard_keeps_are_named_in_the_summary_even_without_a_new_refetch():
    totals = Totals()
    totals.add_flow(request("c-a", refetches([], {}, in_conversation=1, guarded=1)), None)
    assert any("0 re-fetch(es)" in line and "1 result(s) kept by the guard" in line
               for line in totals.summary_lines())


def test_an_unchanged_request_adds_its_refetches_too():
    totals = Totals()
    totals.add_flow(request("c-a", refetches(["r4"], {"read": 1}), action="unchanged"), None)
    assert totals.requests.refetches.calls == 1


def test_the_metrics_count_refetches_per_tool_and_what_they_cost():
    totals = Totals()
    metrics = Metrics(totals)
    before = exposition_values(metrics.exposition().decode())
    assert not any(name.startswith("obsmask_refetches_total") for name in before)
    assert before["obsmask_refetch_result_tokens_total"] == 0
    a_conversation_with_three_refetches(totals)
    after = exposition_values(metrics.exposition().decode())
    assert after['obsmask_refetches_total{tool="read_file"}'] == 2
    assert after['obsmask_refetches_total{tool="bash"}'] == 1
    assert after["obsmask_refetch_result_tokens_total"] == 350
    assert after["obsmask_refetch_extra_turns_total"] == 1
    assert after["obsmask_refetch_guarded_results_total"] == 5


def test_the_metrics_say_what_each_refetch_counter_counts():
    text = Metrics(Totals()).exposition().decode()
    for name in ("obsmask_refetches", "obsmask_refetch_result_tokens",
                 "obsmask_refetch_extra_turns", "obsmask_refetch_guarded_results"):
        assert f"# TYPE {name}_total counter" in text or f"# TYPE {name} counter" in text
        assert f"# HELP {name}" in text


def test_beyond_the_tools_kept_the_others_are_counted_under_one_label():
    """Tool names come from the model: the metrics' labels stay bounded."""
    totals = Totals()
    for number in range(TOOLS_KEPT + 5):
        totals.add_flow(request("c-a", refetches([f"r{number}"], {f"tool_{number}": 1})), None)
    tools = totals.requests.refetches.tools
    assert len(tools) == TOOLS_KEPT + 1 and tools[OTHER_TOOLS] == 5
    assert sum(tools.values()) == totals.requests.refetches.calls == TOOLS_KEPT + 5


@pytest.mark.parametrize("value", [
    "three", 3, ["r4"], True, None,
    {"new": "2", "result_tokens": -5, "extra_turns": 2, "guarded_results": 1.5},
    {"new": True, "new_tools": ["read_file"], "result_tokens": 10**400, "extra_turns": True},
    {"new": float("nan"), "new_tools": {"read_file": "1", "bash": -1, "grep": None},
     "new_calls": "r4"},
])
def test_a_wrong_refetch_value_counts_as_absent_and_the_request_is_still_counted(value):
    totals = Totals()
    totals.add_flow(request("c-a", value), None)
    assert totals.requests.requests == totals.requests.masked == 1
    r = totals.requests.refetches
    assert (r.calls, dict(r.tools), r.result_tokens, r.extra_turns, r.guarded_results) == (
        0, {}, 0, 0, 0)
    assert not any("re-fetch" in line for line in totals.summary_lines())
    Metrics(totals).exposition()  # still made


def test_only_the_wrong_values_of_a_refetch_dict_are_dropped():
    facts = RefetchFacts.read({"new": 2, "new_calls": ["r4", 7, None, "r5"],
                               "new_tools": {"read_file": 2, "bash": "one"},
                               "result_tokens": "many", "extra_turns": 1,
                               "in_conversation": 4, "guarded_results": -1})
    assert facts == RefetchFacts(new=2, new_calls=("r4", "r5"), new_tools=(("read_file", 2),),
                                 result_tokens=0, extra_turns=1, in_conversation=4,
                                 guarded_results=0)
