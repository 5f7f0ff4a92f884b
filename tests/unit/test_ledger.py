"""The ledger (``conversation/billing/ledger.py``): the bill of a conversation so far,
with obsmask's decisions and without, one request at a time; whether the next
request fits in the allowance; the token estimate; the flow's metadata."""

from __future__ import annotations

import pytest

from obsmask_core.conversation.billing.cache_billing import Forwarded
from obsmask_core.conversation.billing.ledger import BillSoFar, Ledger, prefix_tokens
from obsmask_core.conversation.billing.price_models import PRICE_MODELS

ANTHROPIC = PRICE_MODELS["anthropic"]
OPENAI = PRICE_MODELS["openai"]


def test_the_estimate_is_four_characters_a_token_and_three_tokens_an_item():
    assert prefix_tokens(0, 0) == 0
    assert prefix_tokens(3, 0) == 0
    assert prefix_tokens(4, 0) == 1
    assert prefix_tokens(4001, 2) == 1000 + 6
    assert prefix_tokens(7, 10) == 1 + 30


def test_each_alternative_bills_the_forwarded_request_at_its_own_price():
    """The ledgers of the other terms a conversation may be billed under
    each count what the forwarded request costs under theirs, not what it
    costs under the first ledger's."""
    other = Ledger(OPENAI, 2)
    ledger = Ledger(ANTHROPIC, 2, alternatives=[other])
    expected = 0
    for tokens, forwarded in ((3000, Forwarded(3, 2500)), (4000, Forwarded(5, 3000, 3, 2400))):
        plain = ledger.plain_cost(tokens)
        expected += other.masked_cost(forwarded)
        ledger.record(tokens, plain, forwarded, None)
    assert other.requests == 2
    assert other.with_masking == expected
    assert other.with_masking != ledger.with_masking


# affordable() ------------------------------------------------------------------------


@pytest.mark.parametrize("allowance", [0, 2, 5, 100])
def test_a_request_that_lands_exactly_on_the_allowance_is_affordable(allowance):
    ledger = Ledger(ANTHROPIC, allowance)
    plain = 100_000
    assert ledger.affordable(plain * (100 + allowance) // 100, plain)
    assert not ledger.affordable(plain * (100 + allowance) // 100 + 1, plain)


@pytest.mark.parametrize("allowance", [0, 2, 5])
def test_affordable_counts_the_bill_so_far_on_both_sides(allowance):
    """What was spent before weighs in: a ledger behind by its savings can
    afford a dearer request, one ahead of the allowance a cheaper one only."""
    ledger = Ledger(ANTHROPIC, allowance)
    ledger.record(plain_tokens=2000, plain_cost=1_000_000, forwarded=Forwarded(0, 1500),
                  masked_cost=800_000)
    plain = 1_000_000
    limit = (ledger.without_masking + plain) * (100 + allowance) // 100 - ledger.with_masking
    assert limit == 1_200_000 + 20_000 * allowance
    assert ledger.affordable(limit, plain)
    assert not ledger.affordable(limit + 1, plain)
    # And the other way round: a bill so far already over the allowance can
    # only afford a request cheaper than the original.
    over = Ledger(ANTHROPIC, allowance)
    over.record(2000, 1_000_000, Forwarded(0, 2000),
                1_000_000 * (100 + allowance) // 100 + 200_000)
    limit = (over.without_masking + plain) * (100 + allowance) // 100 - over.with_masking
    assert limit < plain
    assert not over.affordable(plain, plain)  # not even a request costing the same
    assert over.affordable(limit, plain)
    assert not over.affordable(limit + 1, plain)


def test_with_no_allowance_only_a_request_no_dearer_than_the_original_is_affordable():
    ledger = Ledger(OPENAI, 0)
    assert ledger.affordable(0, 0)
    assert ledger.affordable(999, 1000)
    assert ledger.affordable(1000, 1000)
    assert not ledger.affordable(1001, 1000)


# record() ------------------------------------------------------------------------


def test_record_accumulates_both_bills_and_remembers_the_previous_requests():
    ledger = Ledger(ANTHROPIC, 2)
    assert (ledger.requests, ledger.with_masking, ledger.without_masking) == (0, 0, 0)
    # The first request shares nothing: every token is written at 1.25.
    first = ledger.plain_cost(3000)
    assert first == 3000 * 1250
    ledger.record(3000, first, Forwarded(0, 2500), ledger.masked_cost(Forwarded(0, 2500)))
    assert (ledger.requests, ledger.with_masking, ledger.without_masking) == (
        1, 2500 * 1250, 3000 * 1250)
    # The next one as sent begins with the whole previous request as sent,
    # and as forwarded with the whole previous forwarded one.
    second = ledger.plain_cost(3500)
    assert second == 3000 * 100 + 500 * 1250
    masked = ledger.masked_cost(Forwarded(0, 3000))
    assert masked == 2500 * 100 + 500 * 1250
    # Unless it changed before the end of that one: read up to the change.
    assert ledger.masked_cost(Forwarded(0, 3000, changed_at=5, tokens_before_change=2000)) \
        == 2000 * 100 + 1000 * 1250
    ledger.record(3500, second, Forwarded(0, 3000), masked)
    assert ledger.requests == 2
    assert ledger.without_masking == 3000 * 1250 + second
    assert ledger.with_masking == 2500 * 1250 + masked
    assert ledger.masked_cost(Forwarded(0, 3500)) == 3000 * 100 + 500 * 1250
    assert ledger.plain_cost(4000) == 3500 * 100 + 500 * 1250


def test_so_far_reports_the_bills_in_base_input_tokens():
    ledger = Ledger(ANTHROPIC, 2)
    ledger.record(3000, 3_750_000, Forwarded(0, 2000), 2_500_001)
    bill = ledger.so_far()
    # The first request reads nothing and writes all it sends.
    assert bill == BillSoFar("anthropic", 1, 2500.001, 3750.0, 2, "prefix", 0, 2000, 2000,
                             request_with_masking=2500.001, request_without_masking=3750.0)
    assert Ledger(OPENAI, 0).so_far() == BillSoFar("openai", 0, 0.0, 0.0, 0)


# BillSoFar.as_metadata() ----------------------------------------------------------------


def test_the_metadata_of_an_empty_bill_has_no_ratio():
    meta = BillSoFar("anthropic", 0, 0.0, 0.0, 2).as_metadata()
    assert meta == {
        "price_model": "anthropic", "requests": 0, "estimated_with_masking": 0.0,
        "estimated_without_masking": 0.0, "ratio": None, "allowance_percent": 2,
        "allowance_used": 0.0, "cache": "prefix",
        "predicted": {"input_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0},
        "cold_ends": [], "cold": False, "request_items": 0, "moved": False,
        "request": {"estimated_with_masking": 0.0, "estimated_without_masking": 0.0},
    }


def test_no_allowance_is_used_while_masking_is_ahead():
    meta = BillSoFar("openai", 12, 800.04, 1000.0, 2).as_metadata()
    assert meta["ratio"] == 0.8
    assert meta["allowance_used"] == 0.0
    assert meta["estimated_with_masking"] == 800.0
    assert meta["requests"] == 12


def test_the_allowance_used_is_how_far_the_masked_bill_is_above_the_other():
    meta = BillSoFar("anthropic", 3, 1012.34, 1000.0, 2).as_metadata()
    assert meta["allowance_used"] == 12.3
    assert meta["ratio"] == 1.0123
    assert BillSoFar("anthropic", 3, 1012.34, 1000.0, 2).ratio == pytest.approx(1.01234)


def test_a_bill_says_whether_its_own_request_came_back_cold_and_names_its_history():
    """A request is cold when its own end is among the cold ends; an
    earlier cold end only says its conversation had one."""
    cold = BillSoFar("anthropic", 3, 1.0, 1.0, 2, cold_ends=(5, 9), request_items=9,
                     history="h-1").as_metadata()
    warm = BillSoFar("anthropic", 4, 1.0, 1.0, 2, cold_ends=(5, 9), request_items=11)
    assert cold["cold"] is True and cold["history"] == "h-1"
    assert warm.as_metadata()["cold"] is False and "history" not in warm.as_metadata()


def test_a_bill_gives_its_own_requests_cost_beside_the_sum_and_a_resumed_ledger_keeps_it():
    """The bill so far adds each request's cost; the bill also says what the
    latest request cost on its own, with masking and without, and a ledger
    resumed from a state says the same."""
    ledger = Ledger(ANTHROPIC, 2)
    ledger.record(3000, 3_750_000, Forwarded(0, 2000), 2_500_000)
    ledger.record(4000, 1_000_000, Forwarded(0, 2600), 900_000)
    bill = ledger.so_far()
    assert (bill.request_with_masking, bill.request_without_masking) == (900.0, 1000.0)
    assert (bill.with_masking, bill.without_masking) == (3400.0, 4750.0)
    resumed = Ledger(ANTHROPIC, 2)
    resumed.restore(ledger.state())
    assert resumed.so_far() == bill
