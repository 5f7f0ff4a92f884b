"""Property-based tests of the cache benchmark's prompt caches
(``obsmask_core.offline.cache.model``), on conversations of blocks that grow,
change in the middle (as masking changes them), move their breakpoints and
pause:

(a) a prompt's chain of digests names its prefixes: two prompts have the
    same n-th digest exactly when they have the same model and first n keys,
    however the chain was taken over from an earlier prompt;
(b) Anthropic's cache reads and writes what a plain cache of key prefixes
    does (every entry kept as the tuple of its keys, every boundary of the
    20 before each breakpoint looked at), and bills each token once;
(c) OpenAI's cache reads the longest token prefix shared with a live
    earlier request, rounded to 1024 + 128k, as found by comparing the
    request with every earlier one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.offline.cache.billing import SETTINGS_MODELS, request_cost
from obsmask_core.offline.cache.model import (
    LOOKBACK_BLOCKS,
    MAX_BREAKPOINTS,
    MIN_CACHED_TOKENS,
    OPENAI_LIFETIME,
    AnthropicCache,
    AnthropicRequest,
    OpenAICache,
    PromptCaches,
    openai_cached,
)
from obsmask_core.offline.cache.prompt_blocks import (
    FIVE_MINUTES,
    ONE_HOUR,
    Breakpoint,
    Prompt,
    common_token_prefix,
    make_prompt,
)

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def block_tokens(block: int) -> tuple[int, ...]:
    """A block's tokens: blocks of the same family (block % 4) share their
    first 20 tokens, so a request can share part of a block with another."""
    size = 40 + (block % 7) * 60
    shared = tuple(range((block % 4) * 100, (block % 4) * 100 + 20))
    return shared + tuple(range(10_000 + block * 1000, 10_000 + block * 1000 + size - 20))


@dataclass(frozen=True)
class Step:
    blocks: tuple[int, ...]
    breakpoints: tuple[Breakpoint, ...]
    time: float
    model: str


@st.composite
def conversations(draw: st.DrawFn) -> list[Step]:
    """Requests that mostly add blocks to the previous one, sometimes change
    one block (a masked result), move their breakpoints (some to the edge of
    the look-back from the previous request's last one) and pause."""
    steps: list[Step] = []
    blocks: list[int] = draw(st.lists(st.integers(0, 30), min_size=1, max_size=8))
    time = 0.0
    for _ in range(draw(st.integers(1, 12))):
        if draw(st.integers(0, 3)) == 0 and len(blocks) > 1:
            blocks[draw(st.integers(0, len(blocks) - 1))] = draw(st.integers(31, 60))
        blocks += draw(st.lists(st.integers(0, 60), max_size=24))
        positions = draw(st.lists(st.integers(0, len(blocks) - 1), max_size=MAX_BREAKPOINTS + 1))
        if steps and steps[-1].breakpoints and draw(st.booleans()):
            # Around the edge of the look-back from an earlier breakpoint.
            reach = steps[-1].breakpoints[-1].block + draw(st.integers(LOOKBACK_BLOCKS - 2,
                                                                       LOOKBACK_BLOCKS + 1))
            positions = [reach] if reach < len(blocks) else positions
        points = tuple(Breakpoint(position, draw(st.sampled_from([FIVE_MINUTES, ONE_HOUR])))
                       for position in positions)
        time += draw(st.sampled_from([0.0, 20.0, 20.0, 20.0, 299.0, 301.0, 3599.0, 3700.0]))
        steps.append(Step(tuple(blocks), points, time, draw(st.sampled_from(["m"] * 4 + ["n"]))))
    return steps


def prompt_of(step: Step, previous: Prompt | None = None) -> Prompt:
    return make_prompt(step.model, [(str(block).encode(), block_tokens(block))
                                    for block in step.blocks],
                       step.breakpoints, step.time, tail=3, reuse=previous)


@SETTINGS
@given(conversations(), st.randoms(use_true_random=False))
def test_a_prompts_chain_names_its_prefixes_whatever_it_took_over(steps, rng):
    prompts: list[Prompt] = []
    for step in steps:
        reuse = rng.choice(prompts) if prompts and rng.random() < 0.8 else None
        prompts.append(prompt_of(step, reuse))
    for a in prompts:
        for b in prompts:
            for n in range(min(len(a.keys), len(b.keys)) + 1):
                same = a.model == b.model and a.keys[:n] == b.keys[:n]
                assert (a.chain[n] == b.chain[n]) is same


@dataclass
class PlainAnthropic:
    """Anthropic's rules on entries named by their model and keys."""

    minimum: int = MIN_CACHED_TOKENS
    entries: dict[tuple[str, tuple[bytes, ...]], tuple[float, float]] = field(default_factory=dict)

    def keep(self, name: tuple[str, tuple[bytes, ...]], now: float, ttl: float) -> None:
        expires = self.entries.get(name, (0.0, ttl))[0]
        if expires <= now or now + ttl > expires:
            self.entries[name] = (now + ttl, ttl)

    def request(self, prompt: Prompt) -> AnthropicRequest:
        if len(prompt.breakpoints) > MAX_BREAKPOINTS:
            return AnthropicRequest(0, 0, 0, prompt.total, over_limit=True)
        now, ends, keys = prompt.time, prompt.ends, prompt.keys
        live = [n for point in prompt.breakpoints
                for n in range(max(1, point.block + 2 - LOOKBACK_BLOCKS), point.block + 2)
                if self.entries.get((prompt.model, keys[:n]), (0.0, 0.0))[0] > now]
        read = max(live, default=0)
        if read:
            name = (prompt.model, keys[:read])
            self.keep(name, now, self.entries[name][1])
        written = written_1h = 0
        billed_to = read
        for point in sorted(prompt.breakpoints, key=lambda p: (p.block, -p.ttl)):
            n = point.block + 1
            if ends[n] < self.minimum:
                continue
            self.keep((prompt.model, keys[:n]), now, point.ttl)
            if n > billed_to:
                tokens = ends[n] - ends[billed_to]
                written_1h += tokens if point.ttl == ONE_HOUR else 0
                written += tokens if point.ttl != ONE_HOUR else 0
                billed_to = n
        return AnthropicRequest(ends[read], written, written_1h, prompt.total - ends[billed_to])


@SETTINGS
@given(conversations(), st.sampled_from([MIN_CACHED_TOKENS, 300]))
def test_anthropic_reads_and_bills_as_a_plain_cache_of_key_prefixes(steps, minimum):
    cache, plain = AnthropicCache(minimum), PlainAnthropic(minimum)
    previous = None
    for step in steps:
        prompt = previous = prompt_of(step, previous)
        found = cache.request(prompt)
        assert found == plain.request(prompt)
        assert found.input_tokens == prompt.total
        assert found.read == 0 or found.read >= minimum
        assert found.over_limit is (len(step.breakpoints) > MAX_BREAKPOINTS)


@SETTINGS
@given(conversations())
def test_openai_reads_the_longest_prefix_of_a_live_earlier_request_rounded(steps):
    cache = OpenAICache()
    earlier: list[tuple[float, str, tuple[int, ...]]] = []
    previous = None
    for step in steps:
        prompt = previous = prompt_of(step, previous)
        flat = tuple(token for tokens in prompt.tokens for token in tokens)
        shared = max((common_token_prefix(tokens, flat) for time, model, tokens in earlier
                      if model == prompt.model and prompt.time - time < OPENAI_LIFETIME),
                     default=0)
        cached = cache.request(prompt)
        assert cached == openai_cached(shared)
        assert cached == 0 or (cached - MIN_CACHED_TOKENS) % 128 == 0
        earlier.append((prompt.time, prompt.model, flat))


@SETTINGS
@given(conversations())
def test_a_request_costs_between_0_1_and_2_0_of_its_tokens_under_every_cached_model(steps):
    caches = PromptCaches()
    previous = None
    for step in steps:
        prompt = previous = prompt_of(step, previous)
        bill = caches.bill(prompt)
        for model in SETTINGS_MODELS:
            cost = request_cost(model, bill)
            assert 0.1 * prompt.total - 1e-6 <= cost <= 2.0 * prompt.total + 1e-6, model.name
