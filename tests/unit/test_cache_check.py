"""The provider's cache as the ledger predicted it and as the provider
reported it, read back from a flow's metadata in the same terms on both
sides: all the input, the part read from the cache, the part written to it."""

from __future__ import annotations

import pytest

from obsmask_core.shared.cache_check import CacheCheck, CacheTokens

Json = dict[str, object]
PREDICTED: Json = {"input_tokens": 10_000, "cache_read_tokens": 8_000,
                   "cache_write_tokens": 1_500}


def flow_facts(fmt: str | None, usage: Json | None, predicted: object = PREDICTED,
               cache: object = "breakpoints") -> Json:
    facts: Json = {"action": "masked",
                   "bill": {"price_model": "anthropic", "cache": cache, "predicted": predicted}}
    if fmt is not None:
        facts["format"] = fmt
    if usage is not None:
        facts["provider_usage"] = usage
    return facts


def test_anthropic_s_input_is_its_three_figures_added_up_as_the_ledger_counts_it():
    """Anthropic's input_tokens leaves out what was read from and written
    to the cache; the ledger's predicted input is the whole prompt."""
    check = CacheCheck.read(flow_facts("anthropic", {
        "input_tokens": 300, "cached_input_tokens": 7_700,
        "cache_creation_input_tokens": 1_800, "output_tokens": 9}))
    assert check == CacheCheck("anthropic", "breakpoints", CacheTokens(10_000, 8_000, 1_500),
                               CacheTokens(9_800, 7_700, 1_800))


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_openai_s_input_already_holds_its_cached_tokens_and_it_reports_no_writes(fmt: str):
    check = CacheCheck.read(flow_facts(fmt, {"input_tokens": 9_000,
                                             "cached_input_tokens": 6_144},
                                       cache="prefix"))
    assert check is not None and check.reported == CacheTokens(9_000, 6_144, 0)


def test_a_flow_that_names_no_format_is_read_as_anthropic_only_when_it_reports_writes():
    anthropic = CacheCheck.read(flow_facts(None, {"input_tokens": 10, "cached_input_tokens": 20,
                                                  "cache_creation_input_tokens": 5}))
    openai = CacheCheck.read(flow_facts(None, {"input_tokens": 30, "cached_input_tokens": 20}))
    assert anthropic is not None and anthropic.reported == CacheTokens(35, 20, 5)
    assert openai is not None and openai.reported == CacheTokens(30, 20, 0)
    assert anthropic.fmt == openai.fmt == "unknown"


@pytest.mark.parametrize("usage", [
    None, {"input_tokens": 50}, {"cached_input_tokens": 50}, {"output_tokens": 5},
    {"input_tokens": "50", "cached_input_tokens": 2}, {"input_tokens": 50,
                                                       "cached_input_tokens": -1},
])
def test_an_answer_that_does_not_report_its_input_and_cache_reads_gives_no_report(
        usage: Json | None):
    check = CacheCheck.read(flow_facts("chat", usage, cache="prefix"))
    assert check is not None and check.reported is None


@pytest.mark.parametrize("bill_change", [
    {"predicted": None}, {"cache": None}, {"cache": 3},
    {"predicted": {"input_tokens": 10, "cache_read_tokens": 2}},
    {"predicted": {"input_tokens": 10, "cache_read_tokens": "2", "cache_write_tokens": 0}},
    {"predicted": {"input_tokens": 10, "cache_read_tokens": 2, "cache_write_tokens": True}},
])
def test_a_bill_without_a_whole_prediction_gives_nothing_to_compare(bill_change: Json):
    facts = flow_facts("anthropic", {"input_tokens": 1, "cached_input_tokens": 1})
    bill = facts["bill"]
    assert isinstance(bill, dict)
    bill.update(bill_change)
    assert CacheCheck.read(facts) is None
    assert CacheCheck.read({"action": "masked"}) is None  # no ledger at all


def test_the_shares_are_of_all_the_input_and_none_without_input():
    tokens = CacheTokens(200, 150, 30) + CacheTokens(200, 50, 10)
    assert (tokens.read_share, tokens.write_share) == (0.5, 0.1)
    assert CacheTokens().read_share is None and CacheTokens().write_share is None
