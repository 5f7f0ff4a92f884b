"""The prompt caches and prices of scripts/bench_cache.py.

Pure code on prompts already cut into blocks: no obsmask, no tiktoken, no
JSON, so the rules can be read (and tested) on their own.

A prompt (``Prompt``) is a sequence of content blocks in the provider's cache
order: each tool definition, then the system blocks, then each message's
content blocks. A block has a key (a digest of its content without
``cache_control``: moving a breakpoint does not change the cached bytes) and
its tokens. A prompt also has its model, its breakpoints (``Breakpoint``:
the blocks that carry ``cache_control``, and the last block when the body
has a top-level ``cache_control``), a few tokens after its last block that
are never cached (``tail``, the reply priming) and the time it is sent, in
seconds. ``chain[n]`` is a digest of the model and of the first n keys: two
prompts begin with the same n blocks exactly when their ``chain[n]`` are
equal. Each replay (one session under one policy) has caches of its own.

Anthropic's cache as documented (``AnthropicCache``, the price model
"anthropic"):

- more than ``MAX_BREAKPOINTS`` (4) breakpoints: the API answers 400; the
  request is counted as such (``over_limit``) and billed as plain input
  (nothing read, nothing written);
- a request reads the longest cache entry equal to one of its own prefixes
  that ends at a block boundary at most ``LOOKBACK_BLOCKS`` (20) blocks
  before one of its breakpoints: for a breakpoint on block b (from 0), the
  boundaries after blocks b, b-1, ..., b-19;
- then it writes an entry at each of its breakpoints whose prefix has at
  least ``minimum_tokens`` (1024 by default);
- billing: the tokens read at 0.1; from the read boundary up to its last
  breakpoint (the last one written), cache writes at 1.25, or 2.0 for the
  tokens up to a breakpoint whose ``cache_control`` has ``"ttl": "1h"``;
  after that breakpoint (and the tail), plain input at 1.0;
- an entry lives 5 minutes (1 hour for ``"ttl": "1h"``) after it was last
  written or read: a read refreshes it.

OpenAI's automatic prefix cache (``OpenAICache``, "openai_90" and
"openai_50"): a request reads the longest token prefix it shares with any
earlier request of the same replay that is still alive, nothing under 1,024
tokens, then rounded down to 1,024 + k * 128. A prefix stays alive one hour
(``OPENAI_LIFETIME``) after the last request that held it: OpenAI keeps its
entries from minutes up to an hour and says no more, so this is the simple
end of that range. Reads at 0.1 ("openai_90") or 0.5 ("openai_50"), every
other token at 1.0.

``PrefixCache`` is the former reading of Anthropic's cache, kept as the
sensitivity line "anthropic_prefix" (no target is checked under it): the
longest common token prefix with the previous request, whatever the
breakpoints and the time, all of it once it reaches 1,024 tokens, and every
other token a write at 1.25.

Prices are in units of the base input price of the model (1.0 = one
uncached input token under OpenAI or without a cache).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

Segment = tuple[bytes, Sequence[int]]  # (key, tokens) of one block or message

MIN_CACHED_TOKENS = 1024
OPENAI_CACHE_STEP = 128
LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4
FIVE_MINUTES = 300.0
ONE_HOUR = 3600.0
OPENAI_LIFETIME = ONE_HOUR
_DIGEST_BYTES = 16


def openai_cached(common_prefix: int) -> int:
    """OpenAI's rule: at least 1024 tokens, in steps of 128."""
    if common_prefix < MIN_CACHED_TOKENS:
        return 0
    steps = (common_prefix - MIN_CACHED_TOKENS) // OPENAI_CACHE_STEP
    return MIN_CACHED_TOKENS + OPENAI_CACHE_STEP * steps


def anthropic_cached(common_prefix: int) -> int:
    """The longest-common-prefix reading of Anthropic's cache: the whole
    common prefix, once it reaches 1024 tokens."""
    return common_prefix if common_prefix >= MIN_CACHED_TOKENS else 0


def common_length(a: Sequence[object], b: Sequence[object]) -> int:
    """How many leading elements two sequences of the same type share."""
    limit = min(len(a), len(b))
    # Whole chunks first (slice comparison runs in C), then one by one.
    chunk = 256
    start = 0
    while start + chunk <= limit and a[start:start + chunk] == b[start:start + chunk]:
        start += chunk
    while start < limit and a[start] == b[start]:
        start += 1
    return start


def common_token_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    return common_length(a, b)


def common_prefix(previous: Sequence[Segment], current: Sequence[Segment]) -> int:
    """Tokens at the start of ``current`` that ``previous`` also starts with:
    whole segments while their keys are equal, then token by token inside
    the first segment that differs."""
    total = 0
    for (old_key, old_tokens), (new_key, new_tokens) in zip(previous, current, strict=False):
        if old_key == new_key:
            total += len(old_tokens)
            continue
        return total + common_token_prefix(old_tokens, new_tokens)
    return total


@dataclass(frozen=True)
class Breakpoint:
    """A ``cache_control`` on block ``block`` (from 0), and the lifetime of
    the entry it writes."""

    block: int
    ttl: float = FIVE_MINUTES


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=_DIGEST_BYTES).digest()


@dataclass(frozen=True)
class Prompt:
    """One request as a provider's cache sees it (see the module's docstring)."""

    model: str
    keys: tuple[bytes, ...]
    tokens: tuple[tuple[int, ...], ...]  # per block
    breakpoints: tuple[Breakpoint, ...]
    chain: tuple[bytes, ...]  # len(keys) + 1 digests
    time: float = 0.0
    tail: int = 0  # tokens after the last block, never cached

    @cached_property
    def ends(self) -> tuple[int, ...]:
        """``ends[n]``: the tokens of the first n blocks."""
        total = 0
        out = [0]
        for tokens in self.tokens:
            total += len(tokens)
            out.append(total)
        return tuple(out)

    @property
    def total(self) -> int:
        return self.ends[-1] + self.tail


def make_prompt(model: str, blocks: Sequence[tuple[bytes, tuple[int, ...]]],
                breakpoints: Sequence[Breakpoint] = (), time: float = 0.0, tail: int = 0,
                reuse: Prompt | None = None) -> Prompt:
    """A prompt of ``blocks`` (key, tokens); its chain of digests is taken
    from ``reuse`` (an earlier prompt, usually the previous request) as far
    as the two share their model and keys, so a request that adds a few
    blocks to the previous one costs a few digests."""
    keys = tuple(key for key, _ in blocks)
    same = 0
    if reuse is not None and reuse.model == model:
        same = common_length(reuse.keys, keys)
        chain = list(reuse.chain[:same + 1])
    else:
        chain = [_digest(model.encode("utf-8", "surrogatepass"))]
    for key in keys[same:]:
        chain.append(_digest(chain[-1] + key))
    return Prompt(model, keys, tuple(tokens for _, tokens in blocks), tuple(breakpoints),
                  tuple(chain), time, tail)


@dataclass
class _Entry:
    expires: float
    ttl: float


@dataclass(frozen=True)
class AnthropicRequest:
    """What Anthropic's cache did with one request, in tokens."""

    read: int
    written: int  # 5-minute writes
    written_1h: int
    plain: int  # neither read nor written
    over_limit: bool = False  # more than MAX_BREAKPOINTS: the API answers 400

    @property
    def input_tokens(self) -> int:
        return self.read + self.written + self.written_1h + self.plain


class AnthropicCache:
    """Anthropic's prompt cache as documented (see the module's docstring),
    for the requests of one replay, in the order they are sent."""

    def __init__(self, minimum_tokens: int = MIN_CACHED_TOKENS) -> None:
        self.minimum_tokens = minimum_tokens
        self._entries: dict[bytes, _Entry] = {}

    def _alive(self, digest: bytes, now: float) -> _Entry | None:
        entry = self._entries.get(digest)
        return entry if entry is not None and now < entry.expires else None

    def _keep(self, digest: bytes, now: float, ttl: float) -> None:
        entry = self._entries.get(digest)
        if entry is None or entry.expires <= now:
            self._entries[digest] = _Entry(now + ttl, ttl)
        elif now + ttl > entry.expires:
            entry.expires, entry.ttl = now + ttl, ttl

    def read_boundary(self, prompt: Prompt) -> int:
        """The blocks of the longest live entry among the boundaries each
        breakpoint looks back to (0: none)."""
        found = 0
        for point in prompt.breakpoints:
            last = min(point.block + 1, len(prompt.keys))
            for boundary in range(last, max(0, last - LOOKBACK_BLOCKS), -1):
                if boundary <= found:
                    break
                if self._alive(prompt.chain[boundary], prompt.time) is not None:
                    found = boundary
                    break
        return found

    def request(self, prompt: Prompt) -> AnthropicRequest:
        """Read, then write; what each token of ``prompt`` is billed as."""
        if len(prompt.breakpoints) > MAX_BREAKPOINTS:
            return AnthropicRequest(0, 0, 0, prompt.total, over_limit=True)
        now, ends = prompt.time, prompt.ends
        read = self.read_boundary(prompt)
        if read:
            entry = self._entries[prompt.chain[read]]
            self._keep(prompt.chain[read], now, entry.ttl)
        written = written_1h = 0
        billed_to = read  # the boundary up to which tokens are accounted for
        for point in sorted(prompt.breakpoints, key=lambda p: (p.block, -p.ttl)):
            boundary = min(point.block + 1, len(prompt.keys))
            if ends[boundary] < self.minimum_tokens:
                continue
            self._keep(prompt.chain[boundary], now, point.ttl)
            if boundary > billed_to:
                if point.ttl >= ONE_HOUR:
                    written_1h += ends[boundary] - ends[billed_to]
                else:
                    written += ends[boundary] - ends[billed_to]
                billed_to = boundary
        return AnthropicRequest(ends[read], written, written_1h, prompt.total - ends[billed_to])


class OpenAICache:
    """OpenAI's automatic prefix cache (see the module's docstring), for the
    requests of one replay, in the order they are sent."""

    def __init__(self, lifetime: float = OPENAI_LIFETIME) -> None:
        self.lifetime = lifetime
        # chain digest -> the last time a request held that prefix
        self._seen: dict[bytes, float] = {}
        # chain[n] -> key of block n -> (chain[n + 1], its tokens)
        self._next: dict[bytes, dict[bytes, tuple[bytes, tuple[int, ...]]]] = {}

    def _alive(self, digest: bytes, now: float) -> bool:
        seen = self._seen.get(digest)
        return seen is not None and now - seen < self.lifetime

    def shared(self, prompt: Prompt) -> int:
        """Tokens of the longest prefix ``prompt`` shares with a live earlier request."""
        now, chain = prompt.time, prompt.chain
        # Every request stamps all its prefixes at once, so the live ones
        # are closed under prefixes: the longest is found by bisection.
        low, high = 0, len(prompt.keys)
        if not self._alive(chain[0], now):
            return 0
        while low < high:
            middle = (low + high + 1) // 2
            if self._alive(chain[middle], now):
                low = middle
            else:
                high = middle - 1
        shared = prompt.ends[low]
        if low < len(prompt.keys):
            inside = max((common_token_prefix(tokens, prompt.tokens[low])
                          for following, tokens in self._next.get(chain[low], {}).values()
                          if self._alive(following, now)), default=0)
            shared += inside
        return shared

    def request(self, prompt: Prompt) -> int:
        """Tokens read from the cache; then the prompt is remembered."""
        cached = openai_cached(self.shared(prompt))
        now, chain = prompt.time, prompt.chain
        for digest in chain:
            self._seen[digest] = now
        for position, key in enumerate(prompt.keys):
            self._next.setdefault(chain[position], {})[key] = (chain[position + 1],
                                                               prompt.tokens[position])
        return cached


class PrefixCache:
    """The longest common prefix with the previous request ("anthropic_prefix")."""

    def __init__(self) -> None:
        self._previous: Prompt | None = None

    def request(self, prompt: Prompt) -> int:
        """Tokens ``prompt`` shares with the previous request; then it is the previous one."""
        previous, self._previous = self._previous, prompt
        if previous is None:
            return 0
        same = common_length(previous.keys, prompt.keys)
        common = previous.ends[same]
        if same < len(previous.keys) and same < len(prompt.keys):
            common += common_token_prefix(previous.tokens[same], prompt.tokens[same])
        return common


ANTHROPIC_RULE = "anthropic"
OPENAI_RULE = "openai"
PREFIX_RULE = "anthropic_prefix"
NO_CACHE_RULE = "none"
CACHE_RULES = (ANTHROPIC_RULE, OPENAI_RULE, PREFIX_RULE)


@dataclass(frozen=True)
class RequestBill:
    """One request's tokens under each cache rule."""

    input_tokens: int
    common_prefix: int  # with the previous request
    cached: dict[str, int]  # cache rule -> tokens read
    anthropic: AnthropicRequest


@dataclass(frozen=True)
class PriceModel:
    """What a token costs under a cache rule, relative to the base input
    price: ``read`` from the cache, ``uncached`` otherwise (for Anthropic's
    rules: a cache write of 5 minutes); under "anthropic", ``write_1h`` a
    write of one hour and ``plain`` a token after the last breakpoint."""

    name: str
    read: float
    uncached: float
    rule: str  # one of CACHE_RULES, or NO_CACHE_RULE
    description: str
    write_1h: float = 2.0
    plain: float = 1.0

    def cost(self, request: RequestBill) -> float:
        if self.rule == NO_CACHE_RULE:
            return self.uncached * request.input_tokens
        if self.rule == ANTHROPIC_RULE:
            spent = request.anthropic
            return (self.read * spent.read + self.uncached * spent.written
                    + self.write_1h * spent.written_1h + self.plain * spent.plain)
        cached = request.cached[self.rule]
        return self.read * cached + self.uncached * (request.input_tokens - cached)


PRICE_MODELS: tuple[PriceModel, ...] = (
    PriceModel("anthropic", 0.1, 1.25, ANTHROPIC_RULE,
               "Anthropic's cache as documented: reads at its breakpoints (20 blocks back) "
               "0.1x, writes 1.25x (2.0x for a 1-hour ttl), after the last breakpoint 1.0x"),
    PriceModel("openai_90", 0.1, 1.0, OPENAI_RULE,
               "OpenAI's prefix cache, reads 0.1x: the longest prefix of a live earlier "
               "request, 1024 + 128k"),
    PriceModel("openai_50", 0.5, 1.0, OPENAI_RULE,
               "OpenAI's prefix cache, reads 0.5x: the longest prefix of a live earlier "
               "request, 1024 + 128k"),
    PriceModel("no_cache", 1.0, 1.0, NO_CACHE_RULE,
               "no prompt cache: every input token at the base price"),
)
PRICE_MODEL_NAMES = tuple(model.name for model in PRICE_MODELS)
# Not one of the models the targets use: the former reading of Anthropic's
# cache, to show how much the faithful one changes.
SENSITIVITY_MODELS: tuple[PriceModel, ...] = (
    PriceModel("anthropic_prefix", 0.1, 1.25, PREFIX_RULE,
               "Anthropic's prices, the longest common prefix with the previous request "
               "read (from 1024 tokens), every other token a write; not a target"),
)
ALL_MODELS = PRICE_MODELS + SENSITIVITY_MODELS
ALL_MODEL_NAMES = tuple(model.name for model in ALL_MODELS)


class PromptCaches:
    """Every cache rule's cache, for the requests of one replay."""

    def __init__(self, minimum_tokens: int = MIN_CACHED_TOKENS) -> None:
        self.anthropic = AnthropicCache(minimum_tokens)
        self.openai = OpenAICache()
        self.prefix = PrefixCache()

    def bill(self, prompt: Prompt) -> RequestBill:
        common = self.prefix.request(prompt)
        spent = self.anthropic.request(prompt)
        cached = {ANTHROPIC_RULE: spent.read, OPENAI_RULE: self.openai.request(prompt),
                  PREFIX_RULE: anthropic_cached(common)}
        return RequestBill(prompt.total, common, cached, spent)


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
            self.cost[model.name] += model.cost(request)
            self.so_far[model.name].append(self.cost[model.name])
        self.per_request.append(request)
