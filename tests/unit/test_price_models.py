"""The price models (``conversation/billing/price_models.py``): what a provider bills
for a request's input tokens, in thousandths of the base input price,
depending on how many of them it shares with the previous request."""

from __future__ import annotations

import pytest

from obsmask_core.conversation.billing.price_models import PRICE_MODELS, PRICE_UNIT, PriceModel

ANTHROPIC = PRICE_MODELS["anthropic"]
OPENAI = PRICE_MODELS["openai"]
OPENAI_50 = PRICE_MODELS["openai_50"]
NONE = PRICE_MODELS["none"]


def test_there_are_exactly_the_four_documented_models_keyed_by_their_name():
    assert sorted(PRICE_MODELS) == ["anthropic", "none", "openai", "openai_50"]
    assert all(model.name == name for name, model in PRICE_MODELS.items())
    assert PRICE_UNIT == 1000


@pytest.mark.parametrize(("model", "read", "uncached"), [
    (ANTHROPIC, 100, 1250),  # cache reads 0.1, writes 1.25
    (OPENAI, 100, 1000),  # cached input 0.1
    (OPENAI_50, 500, 1000),  # cached input 0.5
    (NONE, 1000, 1000),
])
def test_each_model_prices_a_read_and_an_uncached_token_in_thousandths(model, read, uncached):
    assert (model.read, model.uncached) == (read, uncached)
    # One token read from the cache and one not.
    assert model.cost(2, 0) == 2 * uncached
    assert model.cost(1, 0) == uncached


@pytest.mark.parametrize("model", [ANTHROPIC, OPENAI, OPENAI_50])
def test_every_model_with_a_cache_serves_nothing_under_1024_shared_tokens(model):
    assert model.has_cache
    assert model.cached(0) == 0
    assert model.cached(1023) == 0
    assert model.cached(1024) == 1024
    # A request of 1023 tokens shared with the previous one in full: all uncached.
    assert model.cost(1023, 1023) == 1023 * model.uncached
    assert model.cost(1024, 1024) == 1024 * model.read


def test_anthropic_serves_the_whole_shared_prefix_from_the_cache():
    for shared in (1024, 1025, 1151, 1152, 5000, 123_457):
        assert ANTHROPIC.cached(shared) == shared
    # 3000 tokens, 2000 shared: 2000 read at 0.1, 1000 written at 1.25.
    assert ANTHROPIC.cost(3000, 2000) == 2000 * 100 + 1000 * 1250


@pytest.mark.parametrize("model", [OPENAI, OPENAI_50])
def test_openai_caches_in_steps_of_128_tokens_from_1024(model):
    assert [model.cached(n) for n in (1024, 1151, 1152, 1279, 1280, 1281)] == [
        1024, 1024, 1152, 1152, 1280, 1280,
    ]
    assert model.cached(1024 + 128 * 10 + 127) == 1024 + 128 * 10
    # 3000 tokens, 2000 shared: 1920 (1024 + 7 * 128) cached, the other 1080 not.
    assert model.cost(3000, 2000) == 1920 * model.read + 1080 * model.uncached


@pytest.mark.parametrize("model", [ANTHROPIC, OPENAI, OPENAI_50])
def test_a_shared_prefix_longer_than_the_request_counts_as_the_whole_request(model):
    """The previous request may be longer than this one (a masked result
    shortens the history): only this request's tokens can be read."""
    assert model.cost(2048, 10_000) == 2048 * model.read
    assert model.cost(2048, 10_000) == model.cost(2048, 2048)


def test_none_has_no_cache_and_every_token_costs_one_base_price():
    assert not NONE.has_cache
    for shared in (0, 1024, 1152, 50_000):
        assert NONE.cached(shared) == 0
    for tokens, shared in ((0, 0), (1, 0), (5000, 5000), (5000, 100_000), (123_456, 1024)):
        assert NONE.cost(tokens, shared) == PRICE_UNIT * tokens


def test_a_model_has_a_cache_only_when_a_read_costs_less_than_an_uncached_token():
    assert PriceModel("flat", 700, 700, 0, 1).has_cache is False
    assert PriceModel("cheap_reads", 699, 700, 0, 1).has_cache is True


@pytest.mark.parametrize("model", [ANTHROPIC, OPENAI, OPENAI_50, NONE])
def test_sharing_more_with_the_previous_request_never_costs_more(model):
    """The property the ledger relies on: for the same request, a longer
    shared prefix is never billed more."""
    tokens = 4000
    costs = [model.cost(tokens, shared) for shared in range(0, tokens + 200, 7)]
    assert costs == sorted(costs, reverse=True)
    assert costs[0] == tokens * model.uncached
