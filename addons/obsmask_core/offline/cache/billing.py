"""What the replay bills: the price models of the ``price_model`` setting
(``obsmask_core.conversation.billing.price_models``), each under the replay's
cache of its provider (``obsmask_core.offline.cache.model``), and a session's
bill under all of them.

- "anthropic": Anthropic's cache as documented; a read costs 0.1, a write
  1.25 (2.0 for a write of one hour), a token after the last breakpoint 1.0;
- "openai" and "openai_50": OpenAI's prefix cache; a read costs 0.1 or 0.5,
  every other token 1.0;
- "none": no cache, every token at 1.0;
- "anthropic_prefix", not a model of the settings but a sensitivity line:
  Anthropic's prices under the former reading of its cache (``PrefixCache``),
  every token not read a write at 1.25.

Prices are in units of the base input price of the model (1.0 = one
uncached input token under OpenAI or without a cache): the price model's
thousandths over ``PRICE_UNIT``.

The cache benchmark's output, and the tools that read it, name two of the models
otherwise: "openai" is "openai_90" there and "none" is "no_cache"
(``benchmark_name``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from obsmask_core.conversation.billing.price_models import PRICE_MODELS, PRICE_UNIT, PriceModel
from obsmask_core.offline.cache.model import (
    ANTHROPIC_RULE,
    CACHE_RULES,
    NO_CACHE_RULE,
    OPENAI_RULE,
    PREFIX_RULE,
    RequestBill,
)

# Anthropic's prices that its price model leaves out (the proxy's ledger
# bills five-minute writes only): a write of one hour, and a token after the
# last breakpoint, in units of the base input price.
ONE_HOUR_WRITE = 2.0
PLAIN_INPUT = 1.0

# Every price model of the settings, in their order.
SETTINGS_MODELS: tuple[PriceModel, ...] = tuple(PRICE_MODELS.values())
# Not one of the models the targets use: the former reading of Anthropic's
# cache, to show how much the faithful one changes.
SENSITIVITY_MODELS: tuple[PriceModel, ...] = (
    replace(PRICE_MODELS["anthropic"], name="anthropic_prefix"),
)
ALL_MODELS = SETTINGS_MODELS + SENSITIVITY_MODELS

# Per price model (by its name): its name in the cache benchmark's output, the cache
# rule that bills it, and what it means.
_REPLAYED: Mapping[str, tuple[str, str, str]] = MappingProxyType({
    "anthropic": ("anthropic", ANTHROPIC_RULE,
                  "Anthropic's cache as documented: reads at its breakpoints (20 blocks back) "
                  "0.1x, writes 1.25x (2.0x for a 1-hour ttl), after the last breakpoint 1.0x"),
    "openai": ("openai_90", OPENAI_RULE,
               "OpenAI's prefix cache, reads 0.1x: the longest prefix of a live earlier "
               "request, 1024 + 128k"),
    "openai_50": ("openai_50", OPENAI_RULE,
                  "OpenAI's prefix cache, reads 0.5x: the longest prefix of a live earlier "
                  "request, 1024 + 128k"),
    "none": ("no_cache", NO_CACHE_RULE, "no prompt cache: every input token at the base price"),
    "anthropic_prefix": ("anthropic_prefix", PREFIX_RULE,
                         "Anthropic's prices, the longest common prefix with the previous "
                         "request read (from 1024 tokens), every other token a write; not a "
                         "target"),
})


def benchmark_name(model: PriceModel) -> str:
    """The model's name in the cache benchmark's output."""
    return _REPLAYED[model.name][0]


def model_rule(model: PriceModel) -> str:
    """The cache rule the replay bills the model under (one of CACHE_RULES, or NO_CACHE_RULE)."""
    return _REPLAYED[model.name][1]


def model_description(model: PriceModel) -> str:
    return _REPLAYED[model.name][2]


def base_price(thousandths: int) -> float:
    """A price of a price model, in units of the base input price."""
    return thousandths / PRICE_UNIT


BENCHMARK_NAMES = tuple(benchmark_name(model) for model in SETTINGS_MODELS)
ALL_BENCHMARK_NAMES = tuple(benchmark_name(model) for model in ALL_MODELS)


def request_cost(model: PriceModel, request: RequestBill) -> float:
    """What ``request`` costs under ``model``: a token read from the cache
    at its ``read`` price, any other at its ``uncached`` one (for Anthropic's
    rules: a cache write of five minutes); under "anthropic", a write of one
    hour at ``ONE_HOUR_WRITE`` and a token after the last breakpoint at
    ``PLAIN_INPUT``."""
    read, uncached = base_price(model.read), base_price(model.uncached)
    rule = model_rule(model)
    if rule == NO_CACHE_RULE:
        return uncached * request.input_tokens
    if rule == ANTHROPIC_RULE:
        spent = request.anthropic
        return (read * spent.read + uncached * spent.written
                + ONE_HOUR_WRITE * spent.written_1h + PLAIN_INPUT * spent.plain)
    cached = request.cached[rule]
    return read * cached + uncached * (request.input_tokens - cached)


@dataclass
class SessionBill:
    """The sums over the requests of one session, for one policy, the cost
    after each request, and each request's own figures."""

    requests: int = 0
    input_tokens: int = 0
    common_prefix_tokens: int = 0
    cached: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CACHE_RULES, 0))
    # Anthropic's writes: "5m" and "1h" tokens.
    written: dict[str, int] = field(default_factory=lambda: {"5m": 0, "1h": 0})
    # Requests with more than MAX_BREAKPOINTS breakpoints (the API answers 400).
    over_limit: int = 0
    # Per price model, by its name.
    cost: dict[str, float] = field(
        default_factory=lambda: {model.name: 0.0 for model in ALL_MODELS})
    # The cost so far after each request, per price model (the last is ``cost``).
    so_far: dict[str, list[float]] = field(
        default_factory=lambda: {model.name: [] for model in ALL_MODELS})
    per_request: list[RequestBill] = field(default_factory=list)

    def add(self, request: RequestBill) -> None:
        self.requests += 1
        self.input_tokens += request.input_tokens
        self.common_prefix_tokens += request.common_prefix
        for rule, tokens in request.cached.items():
            self.cached[rule] += tokens
        self.written["5m"] += request.anthropic.written
        self.written["1h"] += request.anthropic.written_1h
        self.over_limit += request.anthropic.over_limit
        for model in ALL_MODELS:
            self.cost[model.name] += request_cost(model, request)
            self.so_far[model.name].append(self.cost[model.name])
        self.per_request.append(request)
