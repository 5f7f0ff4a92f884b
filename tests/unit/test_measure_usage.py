"""The provider's figures in the same terms for every format
(``obsmask_core.offline.measure.usage``), and the settings' price models
as the replay bills them and names them in bench_cache's output
(``obsmask_core.offline.cache.billing``)."""

from __future__ import annotations

from obsmask_core.conversation.billing.price_models import PRICE_MODELS
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES
from obsmask_core.conversation.usage.provider_usage import ProviderUsage
from obsmask_core.offline.cache.billing import SETTINGS_MODELS, benchmark_name
from obsmask_core.offline.measure.usage import (
    ProviderTokens,
    cache_rule,
    provider_tokens,
    usage_from_metadata,
)


def test_anthropics_prompt_is_its_three_figures_and_openais_its_input_tokens():
    usage = ProviderUsage(input_tokens=10, cached_input_tokens=4000,
                          cache_creation_input_tokens=300, output_tokens=5)
    assert provider_tokens(usage, ANTHROPIC) == ProviderTokens(4310, 4000, 300)
    openai = ProviderUsage(input_tokens=4310, cached_input_tokens=4096)
    assert provider_tokens(openai, CHAT) == provider_tokens(openai, RESPONSES) == ProviderTokens(
        4310, 4096, None)
    assert provider_tokens(ProviderUsage(output_tokens=5), CHAT) is None
    assert [cache_rule(f) for f in (ANTHROPIC, CHAT, RESPONSES)] == [
        "anthropic", "openai", "openai"]


def test_the_flow_metadata_gives_the_figures_it_holds():
    assert usage_from_metadata({"input_tokens": 12, "cached_input_tokens": 0}) == ProviderUsage(
        input_tokens=12, cached_input_tokens=0)
    assert usage_from_metadata({"input_tokens": True, "other": 3}) is None
    assert usage_from_metadata(None) is None


def test_a_figure_beyond_2_53_or_not_a_count_is_read_as_not_reported():
    """A flow file is untrusted: 10**400 would be a number no sum can hold."""
    assert usage_from_metadata({"input_tokens": 10**400, "cached_input_tokens": 5}) == (
        ProviderUsage(cached_input_tokens=5))
    assert usage_from_metadata({"input_tokens": 2**53 + 1, "output_tokens": -1}) is None
    assert usage_from_metadata({"input_tokens": 2**53}) == ProviderUsage(input_tokens=2**53)


def test_every_price_model_of_the_settings_has_the_replay_model_of_its_prices():
    assert [model.name for model in SETTINGS_MODELS] == list(PRICE_MODELS)
    assert {model.name: benchmark_name(model) for model in SETTINGS_MODELS} == {
        "anthropic": "anthropic", "openai": "openai_90", "openai_50": "openai_50",
        "none": "no_cache"}
