"""The provider's word as a brake (``conversation/billing/brake.py``): an
answer's reported cache figures priced against the ledger's prediction (the
surprise), the trip, and the reading of a flow's bill and usage, where a
figure that is missing or not a number changes nothing."""

from __future__ import annotations

import pytest

from obsmask_core.conversation.billing.brake import (
    CacheBill,
    Prices,
    bill_prices,
    reading,
    reported_figures,
    request_surprise,
    room,
    trips,
)

ANTHROPIC_PRICES = Prices(0.1, 1.25)
BILL = {"price_model": "anthropic", "requests": 3, "estimated_with_masking": 900.0,
        "estimated_without_masking": 1000.0, "allowance_percent": 2, "request_items": 9,
        "predicted": {"input_tokens": 10_000, "cache_read_tokens": 8_000,
                      "cache_write_tokens": 2_000},
        "model_row": {"row": "claude-fable-5", "read": 0.025, "write": 1.25}}


def test_figures_as_predicted_are_no_surprise():
    predicted = CacheBill(read=8_000, written=2_000, plain=0)
    assert request_surprise(predicted, predicted, ANTHROPIC_PRICES) == 0


def test_reads_short_of_the_prediction_are_billed_again_at_the_write_price():
    """The provider read 4,000 of the 8,000 tokens the ledger took for read
    and wrote them again: each costs 1.25 instead of 0.1."""
    predicted = CacheBill(read=8_000, written=2_000, plain=0)
    reported = CacheBill(read=4_000, written=6_000, plain=0)
    assert request_surprise(predicted, reported, ANTHROPIC_PRICES) \
        == pytest.approx(4_000 * (1.25 - 0.1))


def test_the_reported_figures_are_scaled_to_the_ledgers_estimated_tokens():
    """The provider counts real tokens, the ledger estimates them: a report
    in twice as many tokens, split alike, is no surprise; one that reads
    less is counted in the ledger's tokens."""
    predicted = CacheBill(read=8_000, written=2_000, plain=0)
    assert request_surprise(predicted, CacheBill(16_000, 4_000, 0), ANTHROPIC_PRICES) \
        == pytest.approx(0)
    assert request_surprise(predicted, CacheBill(8_000, 12_000, 0), ANTHROPIC_PRICES) \
        == pytest.approx(4_000 * (1.25 - 0.1))


def test_a_provider_that_reads_more_than_predicted_earns_masking_nothing_back():
    predicted = CacheBill(read=4_000, written=6_000, plain=0)
    assert request_surprise(predicted, CacheBill(8_000, 2_000, 0), ANTHROPIC_PRICES) == 0


def test_a_read_of_nothing_is_an_expired_cache_unless_the_request_moved_the_frontier():
    """A pause past the lifetime, an eviction, a routing miss: the request
    as the client sent it would have read nothing either. On a request
    that changed the forwarded history, a read of nothing is masking's."""
    predicted = CacheBill(read=58_000, written=2_000, plain=0)
    assert request_surprise(predicted, CacheBill(0, 61_000, 0), ANTHROPIC_PRICES) == 0
    assert request_surprise(predicted, CacheBill(0, 61_000, 0), ANTHROPIC_PRICES,
                            moved=True) == pytest.approx(58_000 * (1.25 - 0.1))


def test_new_text_denser_in_tokens_than_the_estimate_is_no_surprise():
    """The provider read what was predicted; the 2,000 new tokens the
    ledger estimated are 2,670 real ones (code, JSON): the read's share of
    the prompt drops by less than the tolerance."""
    predicted = CacheBill(read=20_000, written=2_000, plain=0)
    assert request_surprise(predicted, CacheBill(20_000, 2_670, 0), ANTHROPIC_PRICES) == 0


def test_a_read_short_by_more_than_the_tolerance_counts_in_full():
    predicted = CacheBill(read=10_000, written=0, plain=0)
    assert request_surprise(predicted, CacheBill(9_100, 900, 0), ANTHROPIC_PRICES) == 0
    assert request_surprise(predicted, CacheBill(8_900, 1_100, 0), ANTHROPIC_PRICES) \
        == pytest.approx(1_100 * (1.25 - 0.1))


def test_the_brake_trips_past_the_allowance_and_not_at_it():
    assert room(900, 1000, 2) == pytest.approx(120)
    assert not trips(900, 1000, 2, 120)
    assert trips(900, 1000, 2, 120.5)
    assert trips(1030, 1000, 2, 0)


def test_anthropic_and_openai_reports_count_the_prompt_differently():
    """Anthropic's input_tokens is the plain input alone; OpenAI's the whole
    prompt, its cached (and, GPT-5.6 on, written) tokens among them."""
    usage = {"input_tokens": 100, "cached_input_tokens": 800, "cache_creation_input_tokens": 50}
    assert reported_figures(usage, anthropic=True) == CacheBill(800, 50, 100)
    openai = {"input_tokens": 1_000, "cached_input_tokens": 800}
    assert reported_figures(openai, anthropic=False) == CacheBill(800, 0, 200)
    assert reported_figures({"input_tokens": 10, "cached_input_tokens": 800},
                            anthropic=False) is None


def test_the_prices_are_the_requests_row_or_its_price_model():
    assert bill_prices(BILL) == Prices(0.025, 1.25)
    assert bill_prices({"price_model": "openai"}) == Prices(0.1, 1.0)
    assert bill_prices({"price_model": "nonsense"}) is None


def test_a_reading_of_a_bill_and_a_usage():
    usage = {"input_tokens": 0, "cached_input_tokens": 4_000,
             "cache_creation_input_tokens": 6_000, "output_tokens": 5}
    read = reading(BILL, usage, anthropic=True)
    assert read is not None
    assert read.surprise == pytest.approx(4_000 * (1.25 - 0.025))
    assert read.room == pytest.approx(120) and read.request_items == 9


@pytest.mark.parametrize("usage", [
    {}, {"input_tokens": 10}, {"input_tokens": "10", "cached_input_tokens": 0},
    {"input_tokens": True, "cached_input_tokens": 0},
    {"input_tokens": -1, "cached_input_tokens": 0}])
def test_a_usage_that_cannot_be_read_gives_no_reading(usage):
    assert reading(BILL, usage, anthropic=True) is None


@pytest.mark.parametrize("change", [
    {"predicted": None}, {"predicted": {"input_tokens": 5}},
    {"predicted": {"input_tokens": 5, "cache_read_tokens": 4, "cache_write_tokens": 4}},
    {"estimated_with_masking": "many"}, {"request_items": 0}, {"allowance_percent": None},
    {"price_model": "nonsense", "model_row": None}])
def test_a_bill_that_cannot_be_read_gives_no_reading(change):
    usage = {"input_tokens": 0, "cached_input_tokens": 4_000, "cache_creation_input_tokens": 10}
    assert reading(BILL | change, usage, anthropic=True) is None
