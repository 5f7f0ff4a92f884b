"""What a provider bills for input tokens, read from its prompt cache or not.

Prices are integers, in thousandths of the model's base input price (1000 =
one input token without a cache), so that the ledger's sums are exact and
every proxy computes the same decision from the same request.

- ``anthropic``: a cache read costs 0.1, every token not read is written to
  the cache at 1.25 (Claude Code and the SDKs put a breakpoint at the end of
  every request); nothing is cached under 1024 tokens.
- ``openai``: cached input at 0.1 (the GPT-4.1 and GPT-5 families), the rest
  at 1.0; cached in steps of 128 tokens from 1024.
- ``openai_50``: the same with a 50% discount (the GPT-4o family).
- ``none``: no cache, every token at 1.0: masking never costs anything.
- ``auto`` (not a model of its own: ``for_format``): each request under its
  provider's, ``anthropic`` for Anthropic Messages requests, ``openai`` for
  Chat Completions and Responses requests.

The prices are the provider's; how much of a request its cache serves is
the provider's cache's rule: OpenAI's automatic prefix cache for Chat
Completions and Responses requests (``openai_cache``), Anthropic's
breakpoints for Messages requests (``breakpoint_billing.BreakpointBilling``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

PRICE_UNIT = 1000  # the base input price of one token


@dataclass(frozen=True)
class PriceModel:
    name: str
    read: int  # a token read from the cache
    uncached: int  # a token not read from it (for Anthropic, a cache write)
    minimum_cached: int  # no prefix shorter than this is served from the cache
    cache_step: int  # the cached prefix is minimum_cached + k * cache_step
    # A token written with an hour's lifetime (Anthropic's ttl "1h"); 0:
    # as ``uncached``.
    long_write: int = 0

    @property
    def has_cache(self) -> bool:
        """Can a change in the history cost more than it saves?"""
        return self.read < self.uncached

    def cached(self, common_prefix: int) -> int:
        """Tokens served from the cache when ``common_prefix`` tokens are
        shared with the previous request."""
        if not self.has_cache or common_prefix < self.minimum_cached:
            return 0
        steps = (common_prefix - self.minimum_cached) // self.cache_step
        return self.minimum_cached + self.cache_step * steps

    def cost(self, tokens: int, common_prefix: int) -> int:
        """A request of ``tokens`` input tokens, ``common_prefix`` of them
        shared with the previous request."""
        cached = self.cached(min(common_prefix, tokens))
        return self.read * cached + self.uncached * (tokens - cached)


PRICE_MODELS: Mapping[str, PriceModel] = MappingProxyType({
    model.name: model
    for model in (
        PriceModel("anthropic", 100, 1250, 1024, 1, long_write=2000),
        PriceModel("openai", 100, 1000, 1024, 128),
        PriceModel("openai_50", 500, 1000, 1024, 128),
        PriceModel("none", 1000, 1000, 0, 1),
    )
})


# OpenAI's automatic cache: nothing under 1,024 tokens, then in steps of 128.
OPENAI_MINIMUM_CACHED = 1024
OPENAI_CACHE_STEP = 128


def openai_cache(model: PriceModel) -> PriceModel:
    """``model``'s prices under OpenAI's automatic prefix cache."""
    return replace(model, minimum_cached=OPENAI_MINIMUM_CACHED, cache_step=OPENAI_CACHE_STEP)


AUTO = "auto"
PRICE_MODEL_NAMES = (*PRICE_MODELS, AUTO)


def for_format(name: str, anthropic: bool) -> PriceModel:
    """The price model a setting names, for an Anthropic Messages request or
    another (``auto`` picks the provider's own)."""
    if name == AUTO:
        return PRICE_MODELS["anthropic" if anthropic else "openai"]
    return PRICE_MODELS[name]


def has_cache(name: str) -> bool:
    """Can a change in the history cost more than it saves, under the price
    model a setting names, for some request?"""
    return name == AUTO or PRICE_MODELS[name].has_cache
