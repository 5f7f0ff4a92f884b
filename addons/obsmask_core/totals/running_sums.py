"""Running sums of flow facts: a conversation's, and the whole run's."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from obsmask_core.shared.cache_check import CacheTokens
from obsmask_core.shared.refetch_facts import RefetchFacts
from obsmask_core.totals.brake import BrakeFigures
from obsmask_core.totals.cold import TurnFigures
from obsmask_core.totals.facts import PROVIDER_FIELDS, CacheFacts, McpFacts, RequestFacts

# Distinct cache miss reasons kept apart; the rest are "other".
CACHE_MISS_REASONS_KEPT = 32
OTHER_REASON = "other"

# Which model a prediction tests: the wire format, the cache as the ledger ran it.
CacheKey = tuple[str, str]
# Tools named one by one in the re-fetch counts (a metric label each); the
# names come from the model, so beyond these the rest are added under one.
TOOLS_KEPT = 100
OTHER_TOOLS = "(other)"


@dataclass
class TokenSavings:
    """Tokens not sent, summed in two figures that only grow (for
    counters): what was saved, and what was added where a placeholder or
    marker cost more tokens than the short text it replaced. The net figure
    is the first minus the second. ``uncounted``: those the proxy could not
    count (no encoding loaded, or too long), in neither sum."""

    saved: int = 0
    added: int = 0
    uncounted: int = 0

    def add(self, tokens_saved: int | None) -> None:
        if tokens_saved is None:
            self.uncounted += 1
        else:
            self.saved += max(tokens_saved, 0)
            self.added += max(-tokens_saved, 0)

    @property
    def net(self) -> int:
        return self.saved - self.added


def _share(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


def _percent(value: float | None) -> str:
    return f"{value:.1%}" if value is not None else "n/a"


def _points(predicted: float | None, reported: float | None) -> str:
    """How far the predicted share is from the reported one, in percentage points."""
    return "" if predicted is None or reported is None else \
        f" ({(predicted - reported) * 100:+.1f} points)"


@dataclass
class CacheFigures:
    """The provider's cache as the ledger predicted it and as the provider
    reported it, added up over the requests whose answers reported it: the
    shares of the input read from the cache (its hit rate) and written to
    it, predicted and reported, say how far the ledger's model is from the
    provider on this traffic."""

    requests: int = 0
    predicted: CacheTokens = field(default_factory=CacheTokens)
    reported: CacheTokens = field(default_factory=CacheTokens)

    def add(self, facts: CacheFacts) -> None:
        self.requests += 1
        self.predicted += facts.predicted
        self.reported += facts.reported

    @property
    def input_ratio(self) -> float | None:
        """The input the ledger estimated over the input the provider counted."""
        return self.predicted.input / self.reported.input if self.reported.input else None

    def as_json(self) -> dict[str, object]:
        p, r = self.predicted, self.reported
        return {
            "requests": self.requests,
            "predicted": p.as_json(),
            "reported": r.as_json(),
            "cache_read_share": {"predicted": _share(p.read_share),
                                 "reported": _share(r.read_share)},
            "cache_write_share": {"predicted": _share(p.write_share),
                                  "reported": _share(r.write_share)},
            "input_ratio": _share(self.input_ratio),
        }

    def describe(self) -> str:
        """The prediction beside the report, as a reader compares them."""
        p, r, ratio = self.predicted, self.reported, self.input_ratio
        return (
            f"hit rate {_percent(p.read_share)} vs {_percent(r.read_share)}"
            f"{_points(p.read_share, r.read_share)}, written "
            f"{_percent(p.write_share)} vs {_percent(r.write_share)} of input"
            f"{_points(p.write_share, r.write_share)}; input {p.input:,} vs {r.input:,} tokens"
            + (f" ({ratio - 1:+.1%})" if ratio is not None else ""))


@dataclass
class RefetchFigures:
    """Re-fetches added up: the calls the model made again once masking
    took their result (each counted in the request whose newest answer made
    it), per tool; the tokens of their results and the model turns that
    did nothing else; and the results the guard kept, summed over requests
    as the masked ones are."""

    calls: int = 0
    tools: Counter[str] = field(default_factory=Counter)
    result_tokens: int = 0
    extra_turns: int = 0
    guarded_results: int = 0

    def add(self, facts: RefetchFacts) -> None:
        self.calls += facts.new
        for tool, number in facts.new_tools:
            if tool not in self.tools and len(self.tools) >= TOOLS_KEPT:
                tool = OTHER_TOOLS
            self.tools[tool] += number
        self.result_tokens += facts.result_tokens
        self.extra_turns += facts.extra_turns
        self.guarded_results += facts.guarded_results

    def __bool__(self) -> bool:
        return bool(self.calls or self.guarded_results)

    def as_json(self) -> dict[str, object]:
        return {
            "calls": self.calls,
            "tools": dict(sorted(self.tools.items())),
            "result_tokens": self.result_tokens,
            "extra_turns": self.extra_turns,
            "guarded_results": self.guarded_results,
        }

    def describe(self) -> str:
        tools = ", ".join(f"{tool} {number:,}" for tool, number in sorted(self.tools.items()))
        return (f"{self.calls:,} re-fetch(es) of a masked result"
                + (f" ({tools})" if tools else "")
                + f": {self.result_tokens:,} tokens of results fetched again, "
                f"{self.extra_turns:,} extra model turn(s); {self.guarded_results:,} "
                "result(s) kept by the guard")


@dataclass
class RequestFigures:
    """Conversation requests added up (one conversation's, or all)."""

    requests: int = 0
    masked: int = 0
    unchanged: int = 0
    passed_through: int = 0
    held_out: int = 0
    tool_results_masked: int = 0
    tool_results_clipped: int = 0
    tool_results_recalled: int = 0
    # The masked results' tokens before minus after, summed over every
    # request (each request sends the history again).
    tokens: TokenSavings = field(default_factory=TokenSavings)
    tool_chars_saved: int = 0
    body_bytes_saved: int = 0
    mask_ms: float = 0.0
    provider_reports: int = 0  # answers with the provider's usage report, and its sums
    provider: Counter[str] = field(default_factory=Counter)
    # The cache predicted beside the provider's report, by the model tested.
    cache: dict[CacheKey, CacheFigures] = field(default_factory=dict)
    refetches: RefetchFigures = field(default_factory=RefetchFigures)
    brake: BrakeFigures = field(default_factory=BrakeFigures)
    # The providers' cache miss reasons (their diagnostics), by reason.
    cache_miss_reasons: Counter[str] = field(default_factory=Counter)
    # The saving on cold turns and on warm ones (requests with a bill).
    turns: TurnFigures = field(default_factory=TurnFigures.empty)

    def add(self, facts: RequestFacts) -> None:
        self.requests += 1
        if facts.action == "masked":
            self.masked += 1
        elif facts.action == "unchanged":
            self.unchanged += 1
        else:
            self.passed_through += 1
        self.held_out += facts.held_out
        self.tool_results_masked += facts.masked_results
        self.tool_results_clipped += facts.clipped_results
        self.tool_results_recalled += facts.recalled_results
        self.tokens.add(facts.tokens_saved)
        self.tool_chars_saved += facts.tool_chars_saved
        self.body_bytes_saved += facts.body_bytes_saved
        self.mask_ms += facts.mask_ms or 0.0
        if facts.provider:
            self.provider_reports += 1
            self.provider.update(facts.provider)
        if (cache := facts.cache) is not None:
            self.cache.setdefault((cache.fmt, cache.cache), CacheFigures()).add(cache)
        if facts.refetches is not None:
            self.refetches.add(facts.refetches)
        if facts.brake is not None:
            self.brake.add(facts.brake)
        if facts.turn is not None:
            self.turns.add(facts.turn, facts.tokens_saved)
        if (reason := facts.cache_miss_reason) is not None:
            # A provider names a handful of reasons: any beyond this many
            # distinct ones are counted together.
            known = reason in self.cache_miss_reasons
            self.cache_miss_reasons[reason if known or len(self.cache_miss_reasons)
                                    < CACHE_MISS_REASONS_KEPT else OTHER_REASON] += 1

    @property
    def tokens_saved(self) -> int:
        return self.tokens.net

    @property
    def masked_requests_uncounted(self) -> int:
        return self.tokens.uncounted

    def as_json(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "masked": self.masked,
            "unchanged": self.unchanged,
            "passed_through": self.passed_through,
            "held_out": self.held_out,
            "tool_results_masked": self.tool_results_masked,
            "tool_results_clipped": self.tool_results_clipped,
            "tool_results_recalled": self.tool_results_recalled,
            "tokens_saved": self.tokens_saved,
            "tokens_added": self.tokens.added,
            "masked_requests_uncounted": self.masked_requests_uncounted,
            "tool_chars_saved": self.tool_chars_saved,
            "body_bytes_saved": self.body_bytes_saved,
            "mask_ms": round(self.mask_ms, 3),
            "provider_reports": self.provider_reports,
            "provider": {name: self.provider[name] for name in PROVIDER_FIELDS},
            "cache_prediction": self.cache_json(),
            "refetches": self.refetches.as_json(),
            "provider_brake": self.brake.as_json(),
            "cache_miss_reasons": dict(sorted(self.cache_miss_reasons.items())),
            "cold_turns": self.turns.as_json(),
        }

    def cache_json(self) -> dict[str, dict[str, dict[str, object]]]:
        """The cache's figures by format, then by cache."""
        out: dict[str, dict[str, dict[str, object]]] = {}
        for (fmt, cache), figures in sorted(self.cache.items()):
            out.setdefault(fmt, {})[cache] = figures.as_json()
        return out


@dataclass
class McpFigures:
    """MCP flows added up."""

    answers: int = 0
    answers_truncated: int = 0
    messages_truncated: int = 0
    strings_cut: int = 0
    chars_saved: int = 0
    # The text cut away minus the markers, summed over the cut answers.
    tokens: TokenSavings = field(default_factory=TokenSavings)
    gateway_errors: int = 0

    def add(self, facts: McpFacts) -> None:
        self.answers += 1
        self.answers_truncated += facts.truncated
        self.messages_truncated += facts.messages_truncated
        self.strings_cut += facts.strings_cut
        self.chars_saved += facts.chars_saved
        self.tokens.add(facts.tokens_saved)
        self.gateway_errors += facts.gateway_error

    @property
    def tokens_saved(self) -> int:
        return self.tokens.net

    @property
    def answers_uncounted(self) -> int:
        return self.tokens.uncounted

    def as_json(self) -> dict[str, object]:
        return {
            "answers": self.answers,
            "answers_truncated": self.answers_truncated,
            "messages_truncated": self.messages_truncated,
            "strings_cut": self.strings_cut,
            "chars_saved": self.chars_saved,
            "tokens_saved": self.tokens_saved,
            "tokens_added": self.tokens.added,
            "answers_uncounted": self.answers_uncounted,
            "gateway_errors": self.gateway_errors,
        }
