"""The totals: every flow's facts added once, per conversation and for the
whole run; what a flow file may hold that is not a fact counts as absent."""

from __future__ import annotations

import gc
import sys

import pytest

from obsmask_core.totals.facts import McpFacts, RequestFacts
from obsmask_core.totals.metrics import Metrics
from obsmask_core.totals.totals import Totals
from support.metrics_text import exposition_values

Json = dict[str, object]


def masked(conversation: str, requests: int, *, saved: int = 100, usage: Json | None = None,
           with_masking: float = 900.0, without_masking: float = 1000.0,
           mask_ms: float = 2.5) -> Json:
    """A masked request's metadata, as the conversation addon writes it."""
    facts: Json = {
        "action": "masked", "format": "chat", "masked_tool_results": 2,
        "clipped_tool_results": 1, "tool_results": 9, "tool_chars_before": 5000,
        "tool_chars_after": 1000, "masked_tokens_before": saved + 20,
        "masked_tokens_after": 20, "body_bytes_before": 8000, "body_bytes_after": 4000,
        "conversation": conversation, "mask_ms": mask_ms,
        "bill": {"price_model": "anthropic", "requests": requests,
                 "estimated_with_masking": with_masking,
                 "estimated_without_masking": without_masking},
    }
    if usage is not None:
        facts["provider_usage"] = usage
    return facts


def test_each_action_is_counted_and_only_masked_requests_save_anything():
    totals = Totals()
    totals.add_flow(masked("c-a", 1), None)
    totals.add_flow({"action": "unchanged", "format": "chat", "reason": "nothing to mask",
                     "conversation": "c-a"}, None)
    totals.add_flow({"action": "passed_through", "format": "chat", "reason": "bad"}, None)
    r = totals.requests
    assert (r.requests, r.masked, r.unchanged, r.passed_through) == (3, 1, 1, 1)
    assert (r.tool_results_masked, r.tool_results_clipped) == (2, 1)
    assert (r.tokens_saved, r.tool_chars_saved, r.body_bytes_saved) == (100, 4000, 4000)
    assert totals.conversations_seen == 1  # the passed-through one has no name


def test_a_masked_request_whose_tokens_were_not_counted_is_said_so_not_added_as_zero():
    totals = Totals()
    facts = masked("c-a", 1)
    facts["masked_tokens_before"] = facts["masked_tokens_after"] = None
    totals.add_flow(facts, None)
    totals.add_flow(masked("c-a", 2, saved=50), None)
    assert totals.requests.tokens_saved == 50
    assert totals.requests.masked_requests_uncounted == 1


def test_the_run_s_bill_adds_each_conversation_s_latest_bill_once():
    """Each request's bill is the conversation's bill so far: the run's bill
    is the sum of every conversation's latest one, whatever order the
    answers ended in."""
    totals = Totals()
    totals.add_flow(masked("c-a", 2, with_masking=180, without_masking=200), None)
    totals.add_flow(masked("c-a", 1, with_masking=100, without_masking=100), None)  # late
    totals.add_flow(masked("c-b", 1, with_masking=50, without_masking=60), None)
    (total,) = totals.bill_totals()
    assert (total.price_model, total.conversations) == ("anthropic", 2)
    assert (total.with_masking, total.without_masking) == (230, 260)
    document = totals.as_json()
    bill = document["bill"]
    assert isinstance(bill, dict) and bill["anthropic"]["estimated_saved"] == 30


def test_the_provider_s_figures_are_summed_as_reported():
    totals = Totals()
    totals.add_flow(masked("c-a", 1, usage={"input_tokens": 10, "cached_input_tokens": 90,
                                            "cache_creation_input_tokens": 5,
                                            "output_tokens": 7}), None)
    totals.add_flow(masked("c-a", 2, usage={"input_tokens": 3, "output_tokens": 1}), None)
    totals.add_flow(masked("c-a", 3), None)  # no report
    r = totals.requests
    assert r.provider_reports == 2
    assert dict(r.provider) == {"input_tokens": 13, "cached_input_tokens": 90,
                                "cache_creation_input_tokens": 5, "output_tokens": 8}


def test_mcp_answers_are_counted_and_cut_ones_add_their_savings():
    totals = Totals()
    totals.add_flow(None, {"mcp": "method"})
    totals.add_flow(None, {"action": "truncated", "messages_truncated": 1, "strings_cut": 2,
                           "chars_before": 100_000, "chars_after": 4_000,
                           "tokens_saved": 20_000})
    totals.add_flow(None, {"action": "truncated", "strings_cut": 1, "chars_before": 9_000,
                           "chars_after": 4_000, "tokens_saved": None})
    totals.add_flow(None, {"gateway_server": "fs", "gateway_error": -32050})
    m = totals.mcp
    assert (m.answers, m.answers_truncated, m.strings_cut) == (4, 2, 3)
    assert (m.chars_saved, m.tokens_saved, m.answers_uncounted) == (101_000, 20_000, 1)
    assert m.gateway_errors == 1


@pytest.mark.parametrize("value", [
    None, 5, "masked", [], {"action": "rewritten"}, {"no": "action"},
])
def test_metadata_that_is_not_a_conversation_request_is_not_counted(value: object):
    assert RequestFacts.read(value) is None
    totals = Totals()
    totals.add_flow(value, None)
    assert totals.requests.requests == 0


def test_a_wrong_value_in_a_flow_file_counts_as_absent():
    facts = masked("c-a", 1)
    facts.update({"masked_tool_results": "two", "mask_ms": True, "masked_tokens_before": -3,
                  "bill": {"price_model": "anthropic", "requests": "1"},
                  "provider_usage": {"input_tokens": 1.5, "output_tokens": 4}})
    read = RequestFacts.read(facts)
    assert read is not None
    assert (read.masked_results, read.mask_ms, read.tokens_saved, read.bill) == (
        0, None, None, None)
    assert read.provider == {"output_tokens": 4}
    assert McpFacts.read("truncated") is None


def test_only_the_most_recent_conversations_are_kept_one_by_one_but_all_are_counted():
    totals = Totals(conversations_kept=2)
    for name in ("c-a", "c-b", "c-c", "c-a"):
        totals.add_flow(masked(name, 1, with_masking=1, without_masking=2), None)
    assert list(totals.conversations) == ["c-c", "c-a"]
    assert totals.conversations_seen == 3
    assert totals.requests.requests == 4
    (total,) = totals.bill_totals()
    assert total.conversations == 3


def test_the_saving_is_given_in_dollars_only_with_a_price():
    totals = Totals(cents_per_million=300)
    totals.add_flow(masked("c-a", 1, with_masking=0, without_masking=2_000_000), None)
    bill = totals.as_json()["bill"]
    assert isinstance(bill, dict) and bill["anthropic"]["estimated_saved_usd"] == 6.0
    assert "about $6.00" in "\n".join(totals.summary_lines())
    plain = Totals()
    plain.add_flow(masked("c-a", 1), None)
    plain_bill = plain.as_json()["bill"]
    assert isinstance(plain_bill, dict) and "estimated_saved_usd" not in plain_bill["anthropic"]


def test_the_summary_names_each_kind_of_figure_it_has():
    totals = Totals()
    assert len(totals.summary_lines()) == 1  # the requests line, even at zero
    totals.add_flow(masked("c-a", 1, usage={"input_tokens": 10}),
                    {"action": "truncated", "strings_cut": 1, "chars_before": 10,
                     "chars_after": 4, "tokens_saved": 2})
    text = "\n".join(totals.summary_lines())
    assert "1 conversation request(s): 1 masked" in text
    assert "bill estimate (anthropic, 1 conversation(s)): 900 input tokens" in text
    assert "the provider reported 1 answer(s): 10 input" in text
    assert "1 MCP answer(s), 1 cut (1 string(s))" in text


def test_the_metrics_are_read_from_the_totals_at_each_scrape():
    totals = Totals()
    metrics = Metrics(totals)
    before = exposition_values(metrics.exposition().decode())
    assert before['obsmask_conversation_requests_total{action="masked"}'] == 0
    totals.add_flow(masked("c-a", 1, usage={"cached_input_tokens": 70}),
                    {"action": "truncated", "strings_cut": 3, "tokens_saved": 9})
    metrics.observe_mask_ms(2.5)
    after = exposition_values(metrics.exposition().decode())
    assert after['obsmask_conversation_requests_total{action="masked"}'] == 1
    assert after['obsmask_tool_results_total{decision="masked"}'] == 2
    assert after['obsmask_tokens_saved_total{feature="conversation"}'] == 100
    assert after['obsmask_tokens_saved_total{feature="mcp"}'] == 9
    assert after['obsmask_provider_tokens_total{kind="cached_input"}'] == 70
    assert after['obsmask_bill_estimated_tokens{masking="on",price_model="anthropic"}'] == 900
    assert after['obsmask_mcp_strings_cut_total'] == 3
    assert after["obsmask_mask_seconds_count"] == 1
    assert after['obsmask_mask_seconds_bucket{le="0.005"}'] == 1
    assert after['obsmask_mask_seconds_bucket{le="0.002"}'] == 0


def test_the_metrics_also_say_what_the_process_costs_its_host():
    """Beside obsmask's figures, the process's own, as every exporter gives
    them: its CPU time and memory, and the garbage collector's work per
    generation (a full collection holds the event loop)."""
    metrics = Metrics(Totals())
    before = exposition_values(metrics.exposition().decode())
    gc.collect()
    after = exposition_values(metrics.exposition().decode())
    assert after['python_gc_collections_total{generation="2"}'] \
        > before['python_gc_collections_total{generation="2"}']
    if sys.platform == "linux":  # read from /proc
        assert after["process_cpu_seconds_total"] > 0
        assert after["process_resident_memory_bytes"] > 1_000_000
    # A reading (the run's totals with the open flows) has them too, from
    # the same collectors.
    reading = metrics.reading(Totals())
    assert reading.host == metrics.host
    assert 'python_gc_collections_total{generation="2"}' in exposition_values(
        reading.exposition().decode())


def test_two_proxies_in_one_process_keep_their_own_metrics():
    first, second = Metrics(Totals()), Metrics(Totals())
    first.observe_mask_ms(1.0)
    assert exposition_values(first.exposition().decode())["obsmask_mask_seconds_count"] == 1
    assert exposition_values(second.exposition().decode())["obsmask_mask_seconds_count"] == 0


def test_every_counter_only_grows_even_when_a_placeholder_costs_more_tokens():
    """A placeholder is chosen when it is shorter in characters; it may
    still tokenise longer than a short text of separators. The net figure
    goes down then, but no Prometheus counter may: saved and added are two
    sums."""
    totals = Totals()
    metrics = Metrics(totals)
    totals.add_flow(masked("c-a", 1, saved=100), None)
    first = exposition_values(metrics.exposition().decode())
    dearer = masked("c-a", 2)
    dearer.update(masked_tokens_before=8, masked_tokens_after=60)
    totals.add_flow(dearer, {"action": "truncated", "strings_cut": 1, "tokens_saved": -5})
    second = exposition_values(metrics.exposition().decode())
    counters = [name for name in first
                if name.startswith("obsmask_") and name.split("{")[0].endswith("_total")]
    assert counters and all(second[name] >= first[name] for name in counters)
    assert second['obsmask_tokens_added_total{feature="conversation"}'] == 52
    assert second['obsmask_tokens_added_total{feature="mcp"}'] == 5
    assert totals.requests.tokens_saved == 48  # the net figure, in the JSON
    assert totals.mcp.answers_uncounted == 0  # a negative saving is counted, not lost


def test_figures_no_proxy_writes_are_read_as_absent_and_the_exposition_still_works():
    totals = Totals()
    facts = masked("c-a", 1)
    facts.update(masked_tool_results=10**400, mask_ms=float("inf"))
    facts["bill"] = {"price_model": "anthropic", "requests": 1,
                     "estimated_with_masking": float("nan"),
                     "estimated_without_masking": 1.0}
    totals.add_flow(facts, None)
    assert totals.requests.tool_results_masked == 0 and totals.bill_totals() == []
    text = Metrics(totals).exposition().decode()
    assert 'obsmask_conversation_requests_total{action="masked"} 1.0' in text


def test_a_request_whose_rewrite_failed_inside_counts_as_passed_through():
    """An internal error leaves no action, only the usage of the answer:
    the request went out as it came."""
    totals = Totals()
    totals.add_flow({"provider_usage": {"input_tokens": 5}}, None)
    assert (totals.requests.requests, totals.requests.passed_through) == (1, 1)


def test_beyond_the_bills_kept_the_oldest_conversations_bills_stay_in_the_sums():
    totals = Totals(conversations_kept=1, bills_kept=2)
    for name in ("c-a", "c-b", "c-c", "c-d"):
        totals.add_flow(masked(name, 1, with_masking=10, without_masking=20), None)
    (total,) = totals.bill_totals()
    assert (total.conversations, total.with_masking, total.without_masking) == (4, 40, 80)
    assert totals.conversations_seen == 4


def test_the_summary_names_requests_passed_through_only_when_there_are_some():
    """"passed through" is the log's word for a request obsmask could not
    read: a reader searches for it, so a summary of none does not say it."""
    totals = Totals()
    totals.add_flow(masked("c-a", 1), None)
    assert "passed through" not in totals.summary_lines()[0]
    totals.add_flow({"action": "passed_through", "format": "chat", "reason": "bad"}, None)
    assert "1 masked, 0 unchanged, 1 passed through;" in totals.summary_lines()[0]


def predicted_and_reported(conversation: str, requests: int, *, fmt: str = "anthropic",
                           cache: str = "breakpoints", predicted: tuple[int, int, int],
                           usage: Json | None) -> Json:
    """A masked request with the ledger's prediction of the provider's
    cache (all the input, read, written) and, if given, the provider's report."""
    facts = masked(conversation, requests, usage=usage)
    facts["format"] = fmt
    bill = facts["bill"]
    assert isinstance(bill, dict)
    total, read, written = predicted
    bill.update(cache=cache, predicted={"input_tokens": total, "cache_read_tokens": read,
                                        "cache_write_tokens": written})
    return facts


def anthropic_usage(uncached: int, read: int, written: int) -> Json:
    return {"input_tokens": uncached, "cached_input_tokens": read,
            "cache_creation_input_tokens": written, "output_tokens": 3}


def cache_figures(totals: Totals) -> dict[tuple[str, str], tuple[int, tuple[int, ...],
                                                                 tuple[int, ...]]]:
    return {key: (f.requests, (f.predicted.input, f.predicted.read, f.predicted.written),
                  (f.reported.input, f.reported.read, f.reported.written))
            for key, f in totals.requests.cache.items()}


def test_the_cache_predicted_and_reported_are_summed_only_over_requests_with_both():
    totals = Totals()
    totals.add_flow(predicted_and_reported("c-a", 1, predicted=(1_000, 0, 1_000),
                                           usage=anthropic_usage(10, 0, 980)), None)
    totals.add_flow(predicted_and_reported("c-a", 2, predicted=(1_500, 1_000, 500),
                                           usage=anthropic_usage(20, 990, 450)), None)
    # The answer reported nothing: the prediction has nothing to be judged by.
    totals.add_flow(predicted_and_reported("c-a", 3, predicted=(2_000, 1_500, 500),
                                           usage=None), None)
    # The answer reported, the ledger predicted nothing (no price model with a cache).
    unpriced = masked("c-a", 4, usage=anthropic_usage(5, 5, 5))
    del unpriced["bill"]
    totals.add_flow(unpriced, None)
    assert totals.requests.provider_reports == 3
    assert cache_figures(totals) == {
        ("anthropic", "breakpoints"): (2, (2_500, 1_000, 1_500), (2_450, 990, 1_430))}


def test_each_format_and_cache_is_summed_apart_for_the_run_and_each_conversation():
    totals = Totals()
    totals.add_flow(predicted_and_reported("c-a", 1, predicted=(1_000, 800, 200),
                                           usage=anthropic_usage(0, 700, 300)), None)
    totals.add_flow(predicted_and_reported("c-b", 1, fmt="chat", cache="prefix",
                                           predicted=(4_000, 3_072, 0),
                                           usage={"input_tokens": 3_900,
                                                  "cached_input_tokens": 2_048}), None)
    assert cache_figures(totals) == {
        ("anthropic", "breakpoints"): (1, (1_000, 800, 200), (1_000, 700, 300)),
        ("chat", "prefix"): (1, (4_000, 3_072, 0), (3_900, 2_048, 0))}
    document = totals.as_json()
    run = as_dict(as_dict(document["requests"])["cache_prediction"])
    assert set(run) == {"anthropic", "chat"}
    anthropic = as_dict(as_dict(run["anthropic"])["breakpoints"])
    assert anthropic == {
        "requests": 1,
        "predicted": {"input_tokens": 1_000, "cache_read_tokens": 800,
                      "cache_write_tokens": 200},
        "reported": {"input_tokens": 1_000, "cache_read_tokens": 700,
                     "cache_write_tokens": 300},
        "cache_read_share": {"predicted": 0.8, "reported": 0.7},
        "cache_write_share": {"predicted": 0.2, "reported": 0.3},
        "input_ratio": 1.0,
    }
    conversations = as_dict(document["conversations"])
    only_b = as_dict(as_dict(conversations["c-b"])["cache_prediction"])
    assert list(only_b) == ["chat"]
    assert as_dict(as_dict(only_b["chat"])["prefix"])["cache_read_share"] == {
        "predicted": 0.768, "reported": 0.5251}


def as_dict(value: object) -> dict[str, object]:
    assert isinstance(value, dict)
    return value


def test_the_summary_gives_the_hit_rate_and_write_share_predicted_beside_reported():
    totals = Totals()
    totals.add_flow(predicted_and_reported("c-a", 1, predicted=(10_000, 8_000, 1_500),
                                           usage=anthropic_usage(300, 7_700, 1_800)), None)
    assert ("totals: cache predicted vs reported (anthropic, breakpoints; 1 answer(s)): "
            "hit rate 80.0% vs 78.6% (+1.4 points), written 15.0% vs 18.4% of input "
            "(-3.4 points); input 10,000 vs 9,800 tokens (+2.0%)") in totals.summary_lines()


def test_the_summary_says_nothing_of_the_cache_without_a_request_to_compare():
    totals = Totals()
    totals.add_flow(predicted_and_reported("c-a", 1, predicted=(10_000, 8_000, 1_500),
                                           usage={"output_tokens": 4}), None)
    assert not any("cache predicted" in line for line in totals.summary_lines())
    assert as_dict(totals.as_json()["requests"])["cache_prediction"] == {}


def test_a_report_of_no_input_gives_no_share_rather_than_a_division_by_zero():
    totals = Totals()
    totals.add_flow(predicted_and_reported("c-a", 1, predicted=(0, 0, 0),
                                           usage=anthropic_usage(0, 0, 0)), None)
    (line,) = [line for line in totals.summary_lines() if "cache predicted" in line]
    assert line.endswith("hit rate n/a vs n/a, written n/a vs n/a of input; input 0 vs 0 tokens")
    (figures,) = totals.requests.cache.values()
    assert as_dict(figures.as_json()["cache_read_share"]) == {"predicted": None,
                                                              "reported": None}
    assert figures.as_json()["input_ratio"] is None


def test_the_metrics_count_the_cache_predicted_and_reported_by_format_cache_and_kind():
    totals = Totals()
    metrics = Metrics(totals)
    assert not any(name.startswith("obsmask_cache_") for name in
                   exposition_values(metrics.exposition().decode()))
    totals.add_flow(predicted_and_reported("c-a", 1, predicted=(10_000, 8_000, 1_500),
                                           usage=anthropic_usage(300, 7_700, 1_800)), None)
    totals.add_flow(predicted_and_reported("c-b", 1, fmt="responses", cache="prefix",
                                           predicted=(2_000, 1_024, 0),
                                           usage={"input_tokens": 2_100,
                                                  "cached_input_tokens": 1_152}), None)
    values = exposition_values(metrics.exposition().decode())
    labels = 'cache="breakpoints",format="anthropic"'
    assert [values[f'obsmask_cache_{side}_tokens_total{{{labels},kind="{kind}"}}']
            for side in ("predicted", "reported")
            for kind in ("input", "cache_read", "cache_write")] == [
        10_000, 8_000, 1_500, 9_800, 7_700, 1_800]
    labels = 'cache="prefix",format="responses"'
    assert values[f'obsmask_cache_predicted_tokens_total{{{labels},kind="cache_read"}}'] == 1_024
    assert values[f'obsmask_cache_reported_tokens_total{{{labels},kind="input"}}'] == 2_100


def test_the_net_line_gives_the_bill_ratio_apart_from_the_tokens_not_sent():
    """The end-of-run summary's second line: the bill with obsmask over the
    bill without (the same figure obsmask report's page leads with), per
    price model, never mistaken for the tokens not sent."""
    totals = Totals()
    totals.add_flow(masked("c-a", 1, saved=300, with_masking=900, without_masking=1000), None)
    totals.add_flow(masked("c-b", 1, saved=200, with_masking=1200, without_masking=1000), None)
    lines = totals.summary_lines()
    assert lines[1] == (
        "totals: net bill with obsmask over the bill without, estimated: 1.050× (+5.0%) under "
        "anthropic (2 conversation(s)); not the 500 input tokens not sent, which is no bill: "
        "a masked result makes a caching provider bill again what follows it")
    assert "500 input tokens not sent" in lines[0]


def test_without_a_bill_estimate_the_net_line_says_what_the_tokens_not_sent_are():
    totals = Totals()
    totals.add_flow({"action": "masked", "format": "chat", "masked_tokens_before": 120,
                     "masked_tokens_after": 20, "conversation": "c-a"}, None)
    assert totals.summary_lines()[1] == (
        "totals: net bill: no estimate (no price model with a cache); 100 input tokens not "
        "sent, which is the saving only where the provider has no prompt cache")
