"""The prompt-cache and billing model of scripts/bench_cache.py.

Pure functions on token sequences: no obsmask, no tiktoken, so the rules can
be read (and tested) on their own.

A prompt is a list of segments, one per message: ``(key, tokens)``, where
``key`` is a digest of the message's JSON (equal keys mean equal tokens) and
``tokens`` its framing and text tokens. A provider serves from its cache the
longest common prefix (in tokens) with the previous request of the same
conversation, subject to its rules:

- OpenAI: nothing under 1024 tokens, then in steps of 128 tokens
  (1024, 1152, 1280, ...), rounded down;
- Anthropic: nothing under 1024 tokens (the minimum cacheable prompt of
  Sonnet/Opus; Haiku's is 2048), then the whole common prefix. The client
  puts its cache breakpoint at the end of every request (as Claude Code
  does), so every input token not read from the cache is written to it.

The "anthropic" rule (the one the targets are checked under) is
optimistic: Anthropic's cache only hits at a block where an earlier request
put a breakpoint (looking back at most 20 blocks from the new breakpoint),
not at any token. A request whose
history changed in the middle (a newly masked result) finds no such entry,
and pays a write for its whole prompt. ``BreakpointCache`` models that, as the
sensitivity model "anthropic_breakpoints" (no target is checked under it).

Prices are in units of the base input price of the model (1.0 = one
uncached input token under OpenAI or without a cache).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

Segment = tuple[bytes, Sequence[int]]

MIN_CACHED_TOKENS = 1024
OPENAI_CACHE_STEP = 128


def openai_cached(common_prefix: int) -> int:
    """OpenAI's rule: at least 1024 tokens, in steps of 128."""
    if common_prefix < MIN_CACHED_TOKENS:
        return 0
    steps = (common_prefix - MIN_CACHED_TOKENS) // OPENAI_CACHE_STEP
    return MIN_CACHED_TOKENS + OPENAI_CACHE_STEP * steps


def anthropic_cached(common_prefix: int) -> int:
    """Anthropic's: the whole common prefix, once it reaches 1024 tokens."""
    return common_prefix if common_prefix >= MIN_CACHED_TOKENS else 0


@dataclass(frozen=True)
class PriceModel:
    """What a cached and an uncached input token cost, relative to the base
    input price, and which cache rule decides how many tokens are cached."""

    name: str
    read: float  # a token served from the cache
    uncached: float  # a token not served from it (a cache write for Anthropic)
    rule: str  # "openai", "anthropic", "anthropic_breakpoints" or "none"
    description: str

    def cost(self, input_tokens: int, cached: int) -> float:
        return self.read * cached + self.uncached * (input_tokens - cached)


PRICE_MODELS: tuple[PriceModel, ...] = (
    PriceModel("anthropic", 0.1, 1.25, "anthropic",
               "Anthropic: cache reads 0.1x, every uncached token a cache write at 1.25x"),
    PriceModel("openai_90", 0.1, 1.0, "openai",
               "OpenAI-style cache with a 90% discount (reads 0.1x), 1024 + 128k rule"),
    PriceModel("openai_50", 0.5, 1.0, "openai",
               "OpenAI-style cache with a 50% discount (reads 0.5x), 1024 + 128k rule"),
    PriceModel("no_cache", 1.0, 1.0, "none",
               "no prompt cache: every input token at the base price"),
)
PRICE_MODEL_NAMES = tuple(model.name for model in PRICE_MODELS)
# Not one of the four models the targets use: Anthropic's prices with its
# cache as it works (hits only at earlier breakpoints), to show how
# optimistic "anthropic" is.
SENSITIVITY_MODELS: tuple[PriceModel, ...] = (
    PriceModel("anthropic_breakpoints", 0.1, 1.25, "anthropic_breakpoints",
               "Anthropic's prices, reads only at an earlier request's breakpoint "
               "(its end) found within 20 messages of the end; not a target"),
)
ALL_MODELS = PRICE_MODELS + SENSITIVITY_MODELS
ALL_MODEL_NAMES = tuple(model.name for model in ALL_MODELS)


def common_token_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    limit = min(len(a), len(b))
    # Whole chunks first (slice comparison runs in C), then token by token.
    chunk = 256
    start = 0
    while start + chunk <= limit and a[start:start + chunk] == b[start:start + chunk]:
        start += chunk
    while start < limit and a[start] == b[start]:
        start += 1
    return start


def common_prefix(previous: Sequence[Segment], current: Sequence[Segment]) -> int:
    """Tokens at the start of ``current`` that ``previous`` also starts with:
    whole messages while their keys are equal, then token by token inside
    the first message that differs."""
    total = 0
    for (old_key, old_tokens), (new_key, new_tokens) in zip(previous, current, strict=False):
        if old_key == new_key:
            total += len(old_tokens)
            continue
        return total + common_token_prefix(old_tokens, new_tokens)
    return total


LOOKBACK_BLOCKS = 20


class BreakpointCache:
    """Anthropic's cache as documented: a request writes one entry, the
    prompt up to its breakpoint (its end, as Claude Code puts it); a later
    request reads the longest entry that equals one of its own prefixes
    ending at a block boundary at most 20 blocks before its breakpoint.
    Messages stand for blocks here (an Anthropic assistant turn is two or
    more blocks, so this looks back a little further than the API)."""

    def __init__(self) -> None:
        self._entries: set[bytes] = set()
        self._keys: list[bytes] = []
        self._chain: list[bytes] = [b""]

    def read_then_write(self, segments: Sequence[Segment]) -> int:
        """Tokens read from the cache by this request; then write its entry."""
        keys = [key for key, _ in segments]
        same = 0
        for old, new in zip(self._keys, keys, strict=False):
            if old != new:
                break
            same += 1
        chain = self._chain[: same + 1]
        for key in keys[same:]:
            chain.append(hashlib.blake2b(chain[-1] + key, digest_size=16).digest())
        read = 0
        for end in range(len(keys), max(0, len(keys) - LOOKBACK_BLOCKS) - 1, -1):
            if end and chain[end] in self._entries:
                read = sum(len(tokens) for _, tokens in segments[:end])
                break
        self._entries.add(chain[-1])
        self._keys, self._chain = keys, chain
        return read


CACHE_RULES = ("openai", "anthropic", "anthropic_breakpoints")


def cached_tokens(rule: str, common: int, breakpoint_read: int) -> int:
    if rule == "openai":
        return openai_cached(common)
    if rule == "anthropic":
        return anthropic_cached(common)
    if rule == "anthropic_breakpoints":
        return anthropic_cached(breakpoint_read)
    return 0


@dataclass
class SessionBill:
    """The sums over the requests of one session, for one policy, and the
    cost after each request."""

    requests: int = 0
    input_tokens: int = 0
    common_prefix_tokens: int = 0
    cached: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CACHE_RULES, 0))
    cost: dict[str, float] = field(
        default_factory=lambda: {model.name: 0.0 for model in ALL_MODELS})
    # The cost so far after each request, per price model (the last is ``cost``).
    so_far: dict[str, list[float]] = field(
        default_factory=lambda: {model.name: [] for model in ALL_MODELS})

    def add(self, input_tokens: int, common: int, breakpoint_read: int) -> None:
        """One request: ``input_tokens`` in all, ``common`` of them shared
        with the previous request, ``breakpoint_read`` of them found at an
        earlier breakpoint."""
        self.requests += 1
        self.input_tokens += input_tokens
        self.common_prefix_tokens += common
        for rule in CACHE_RULES:
            self.cached[rule] += cached_tokens(rule, common, breakpoint_read)
        for model in ALL_MODELS:
            cached = cached_tokens(model.rule, common, breakpoint_read)
            self.cost[model.name] += model.cost(input_tokens, cached)
            self.so_far[model.name].append(self.cost[model.name])
