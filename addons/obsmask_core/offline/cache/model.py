"""The prompt caches of the cache benchmark, on prompts already cut into
blocks (``obsmask_core.offline.cache.prompt_blocks``); what their tokens cost
is ``obsmask_core.offline.cache.billing``'s. Each replay (one session under
one policy) has caches of its own.

Anthropic's cache as documented (``AnthropicCache``, billed by the price
model "anthropic"):

- more than ``MAX_BREAKPOINTS`` (4) breakpoints: the API answers 400; the
  request is counted as such (``over_limit``) and billed as plain input
  (nothing read, nothing written);
- a request reads the longest cache entry equal to one of its own prefixes
  that ends at a block boundary at most ``lookback_blocks`` blocks before
  one of its breakpoints. The documentation says "up to approximately 20
  blocks", read two ways: strictly (``LOOKBACK_BLOCKS``, 20: for a
  breakpoint on block b, from 0, the boundaries after blocks b, b-1, ...,
  b-19, the default) or leniently (``LENIENT_LOOKBACK_BLOCKS``, 21: also
  the boundary after block b-20);
- then it writes an entry at each of its breakpoints whose prefix has at
  least ``minimum_tokens`` (1024 by default);
- what each token is: read, from the read boundary up to its last
  breakpoint (the last one written) a cache write, of one hour for the
  tokens up to a breakpoint whose ``cache_control`` has ``"ttl": "1h"``;
  after that breakpoint (and the tail), plain input;
- an entry lives 5 minutes (1 hour for ``"ttl": "1h"``) after it was last
  written or read: a read refreshes it.

OpenAI's automatic prefix cache (``OpenAICache``, "openai" and
"openai_50"): a request reads the longest token prefix it shares with any
earlier request of the same replay that is still alive, nothing under 1,024
tokens, then rounded down to 1,024 + k * 128 (the minimum and the step are
parameters: GPT-5.6 and later serve the prefix whole, a step of 1). A
prefix stays alive one hour (``OPENAI_LIFETIME``) after the last request
that held it: OpenAI keeps its entries from minutes up to an hour and says
no more, so this is the simple end of that range.

``PrefixCache`` is the former reading of Anthropic's cache, kept as the
sensitivity line "anthropic_prefix" (no target is checked under it): the
longest common token prefix with the previous request, whatever the
breakpoints and the time, all of it once it reaches 1,024 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.conversation.billing.price_models import (
    OPENAI_CACHE_STEP,
    OPENAI_MINIMUM_CACHED,
)
from obsmask_core.offline.cache.prompt_blocks import (
    ONE_HOUR,
    Prompt,
    common_length,
    common_token_prefix,
)

MIN_CACHED_TOKENS = 1024
LOOKBACK_BLOCKS = 20  # the strict reading of "approximately 20 blocks"
LENIENT_LOOKBACK_BLOCKS = 21  # the lenient one: one boundary further back
MAX_BREAKPOINTS = 4
OPENAI_LIFETIME = ONE_HOUR


def openai_cached(common_prefix: int, minimum: int = OPENAI_MINIMUM_CACHED,
                  step: int = OPENAI_CACHE_STEP) -> int:
    """OpenAI's rule: at least ``minimum`` tokens (1024), in steps of
    ``step`` (128; 1: the whole shared prefix)."""
    if common_prefix < minimum:
        return 0
    return minimum + step * ((common_prefix - minimum) // step)


def anthropic_cached(common_prefix: int) -> int:
    """The longest-common-prefix reading of Anthropic's cache: the whole
    common prefix, once it reaches 1024 tokens."""
    return common_prefix if common_prefix >= MIN_CACHED_TOKENS else 0


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

    def __init__(self, minimum_tokens: int = MIN_CACHED_TOKENS,
                 lookback_blocks: int = LOOKBACK_BLOCKS) -> None:
        self.minimum_tokens = minimum_tokens
        self.lookback_blocks = lookback_blocks
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
            for boundary in range(last, max(0, last - self.lookback_blocks), -1):
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

    def __init__(self, lifetime: float = OPENAI_LIFETIME, minimum: int = OPENAI_MINIMUM_CACHED,
                 step: int = OPENAI_CACHE_STEP) -> None:
        self.lifetime = lifetime
        self.minimum = minimum
        self.step = step
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
        cached = openai_cached(self.shared(prompt), self.minimum, self.step)
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


# The cache rules: which of the caches above serves a request's tokens
# (NO_CACHE_RULE: none does).
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
