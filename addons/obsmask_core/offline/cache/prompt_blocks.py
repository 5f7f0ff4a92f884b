"""A prompt as a provider's prompt cache sees it (the caches themselves are
``obsmask_core.offline.cache.model``).

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
equal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

Segment = tuple[bytes, Sequence[int]]  # (key, tokens) of one block or message

# The lifetimes of Anthropic's cache entries, in seconds.
FIVE_MINUTES = 300.0
ONE_HOUR = 3600.0
_DIGEST_BYTES = 16


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
