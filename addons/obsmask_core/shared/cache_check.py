"""A request's prompt cache as the ledger predicted it (``bill.predicted``)
and as the provider reported it (``provider_usage``), read back from the
flow's metadata with a check of every value, in the same terms on both
sides: all the input, the part read from the cache, the part written to it.

The ledger estimates tokens (characters / 4 under Anthropic), the provider
counts them: the two sides differ on real traffic, and a user judges the
prediction by how far apart they are. The totals add them up and the
content view shows them; both read them here (neither may lean on the
other's folder).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from obsmask_core.shared.read_back import count, mapping, word
from obsmask_core.shared.request_record import BillKey, Key, PredictedKey, UsageKey

# The one wire format whose provider leaves the cached tokens out of its
# input_tokens (provider_usage.ProviderUsage).
ANTHROPIC_FORMAT = "anthropic"


@dataclass(frozen=True)
class CacheTokens:
    """Input tokens of a request, or of many added up: all of them (cached
    included), those read from the cache and those written to it."""

    input: int = 0
    read: int = 0
    written: int = 0

    def __add__(self, other: CacheTokens) -> CacheTokens:
        return CacheTokens(self.input + other.input, self.read + other.read,
                           self.written + other.written)

    @property
    def read_share(self) -> float | None:
        """The cache's hit rate: the share of the input read from it."""
        return self.read / self.input if self.input else None

    @property
    def write_share(self) -> float | None:
        return self.written / self.input if self.input else None

    def as_json(self) -> dict[str, int]:
        # The names of the ledger's prediction in the flow's metadata.
        return {PredictedKey.INPUT_TOKENS: self.input, PredictedKey.CACHE_READ_TOKENS: self.read,
                PredictedKey.CACHE_WRITE_TOKENS: self.written}

    @classmethod
    def predicted(cls, value: object) -> CacheTokens | None:
        """The ledger's ``bill.predicted``, or None if a figure is missing."""
        facts = mapping(value)
        total, read, written = (count(facts.get(PredictedKey.INPUT_TOKENS)),
                                count(facts.get(PredictedKey.CACHE_READ_TOKENS)),
                                count(facts.get(PredictedKey.CACHE_WRITE_TOKENS)))
        if total is None or read is None or written is None:
            return None
        return cls(total, read, written)

    @classmethod
    def reported(cls, value: object, fmt: str | None) -> CacheTokens | None:
        """The provider's ``provider_usage`` in the ledger's terms, or None
        without its input and cache-read figures (a provider that does not
        report its cache cannot be compared). Anthropic's ``input_tokens``
        counts neither the reads nor the writes: all the input is the three
        added up; OpenAI's counts its cached and written tokens, and only
        GPT-5.6 and later report writes (``cache_write_tokens``): else 0."""
        usage = mapping(value)
        uncached = count(usage.get(UsageKey.INPUT_TOKENS))
        read = count(usage.get(UsageKey.CACHED_INPUT_TOKENS))
        if uncached is None or read is None:
            return None
        written = count(usage.get(UsageKey.CACHE_CREATION_INPUT_TOKENS))
        anthropic = fmt == ANTHROPIC_FORMAT if fmt is not None else written is not None
        written = written or 0
        return cls(uncached + read + written if anthropic else uncached, read, written)


@dataclass(frozen=True)
class CacheCheck:
    """One request's cache: the ledger's prediction and, when the answer
    carried one, the provider's report. ``fmt`` is the wire format,
    ``cache`` the provider's cache as the ledger ran it (``breakpoints``,
    Anthropic's; ``prefix``, OpenAI's automatic one)."""

    fmt: str
    cache: str
    predicted: CacheTokens
    reported: CacheTokens | None

    @classmethod
    def read(cls, facts: Mapping[str, object]) -> CacheCheck | None:
        """From a conversation flow's metadata; None without the ledger's
        prediction (no price model with a cache, or a flow of an earlier
        version)."""
        bill = mapping(facts.get(Key.BILL))
        cache, predicted = word(bill.get(BillKey.CACHE)), CacheTokens.predicted(
            bill.get(BillKey.PREDICTED))
        if cache is None or predicted is None:
            return None
        fmt = word(facts.get(Key.FORMAT))
        return cls(fmt or "unknown", cache, predicted,
                   CacheTokens.reported(facts.get(Key.PROVIDER_USAGE), fmt))
