"""The totals as Prometheus metrics (``/obsmask/metrics``), for teams that
run obsmask as a shared service.

The counters are read from the totals at each scrape (a collector, not a
second set of books), so the metrics and ``/obsmask/totals`` always agree;
the histogram of the masking time is the one metric kept here. Each proxy
has a registry of its own: nothing of obsmask lands in prometheus_client's
global registry (a second proxy in the same process, or a test, starts from
zero). Beside obsmask's own figures, the registry holds the process's, as
every Prometheus exporter gives them (``process_*``: CPU seconds, resident
memory; ``python_gc_*``: the garbage collector's collections per
generation), and what those collections took (``gc_pauses``), so that what
the proxy costs its host is watched where what it saves is.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from obsmask_core.totals.brake import BrakeFigures
from obsmask_core.totals.cold import TurnFigures
from obsmask_core.totals.facts import PROVIDER_FIELDS
from obsmask_core.totals.gc_pauses import GcPauses
from obsmask_core.totals.running_sums import RefetchFigures
from obsmask_core.totals.totals import Totals

# From the rewrite of a small body to that of the largest: its time grows
# with the body (docs/benchmarks.md has the rate).
MASK_SECONDS_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
                        2.0, 5.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class TotalsCollector(Collector):
    """Counters and gauges from the totals, at each scrape."""

    def __init__(self, totals: Totals) -> None:
        self.totals = totals

    def collect(self) -> Iterator[Metric]:
        r, m = self.totals.requests, self.totals.mcp
        requests = CounterMetricFamily(
            "obsmask_conversation_requests", "Conversation requests seen, by what obsmask did.",
            labels=["action"])
        for action, count in (("masked", r.masked), ("unchanged", r.unchanged),
                              ("passed_through", r.passed_through)):
            requests.add_metric([action], count)
        yield requests
        results = CounterMetricFamily(
            "obsmask_tool_results", "Tool results shortened (masked, clipped) or put back "
            "(recalled), summed over requests.", labels=["decision"])
        for decision, count in (("masked", r.tool_results_masked),
                                ("clipped", r.tool_results_clipped),
                                ("recalled", r.tool_results_recalled)):
            results.add_metric([decision], count)
        yield results
        # Two counters, each only growing: a placeholder or marker can cost
        # more tokens than the short text it replaced (the net figure is
        # saved minus added).
        yield _by_feature(
            "obsmask_tokens_saved", "Tokens not sent (tiktoken's count, or its estimate), by "
            "feature, summed over the requests and answers that saved tokens.",
            r.tokens.saved, m.tokens.saved)
        yield _by_feature(
            "obsmask_tokens_added", "Tokens added where a placeholder or marker cost more "
            "than the text it replaced, by feature.", r.tokens.added, m.tokens.added)
        provider = CounterMetricFamily(
            "obsmask_provider_tokens", "Tokens the provider reported in its answers, by "
            "kind (as reported: OpenAI's input includes the cached part, Anthropic's does "
            "not).", labels=["kind"])
        for name in PROVIDER_FIELDS:
            provider.add_metric([name.removesuffix("_tokens")], r.provider[name])
        yield provider
        # The ledger's prediction and the provider's report of the same
        # requests (those whose answer reported the cache), in the same
        # terms: the error of the model is one counter over the other.
        predicted = CounterMetricFamily(
            "obsmask_cache_predicted_tokens", "Input tokens the ledger predicted the "
            "provider would report (estimated), by kind: all the input, read from the "
            "cache, written to it; over the requests whose answer reported the cache.",
            labels=["format", "cache", "kind"])
        reported = CounterMetricFamily(
            "obsmask_cache_reported_tokens", "Input tokens the provider reported for the "
            "requests of obsmask_cache_predicted_tokens, in the same terms: all the input "
            "(cached included), read from the cache, written to it.",
            labels=["format", "cache", "kind"])
        for (fmt, cache), figures in sorted(r.cache.items()):
            for family, tokens in ((predicted, figures.predicted),
                                   (reported, figures.reported)):
                for kind, value in (("input", tokens.input), ("cache_read", tokens.read),
                                    ("cache_write", tokens.written)):
                    family.add_metric([fmt, cache, kind], value)
        yield predicted
        yield reported
        yield from _refetch_metrics(r.refetches)
        yield from _brake_metrics(r.brake)
        yield from _turn_metrics(r.turns)
        bill = GaugeMetricFamily(
            "obsmask_bill_estimated_tokens", "The bill of all conversations so far, "
            "estimated by the ledger in input tokens at the base price, with and without "
            "masking.", labels=["price_model", "masking"])
        for total in self.totals.bill_totals():
            bill.add_metric([total.price_model, "on"], total.with_masking)
            bill.add_metric([total.price_model, "off"], total.without_masking)
        yield bill
        yield GaugeMetricFamily("obsmask_conversations", "Conversations seen.",
                                value=self.totals.conversations_seen)
        mcp = CounterMetricFamily("obsmask_mcp_answers", "MCP answers seen, by action.",
                                  labels=["action"])
        mcp.add_metric(["truncated"], m.answers_truncated)
        mcp.add_metric(["unchanged"], m.answers - m.answers_truncated)
        yield mcp
        yield CounterMetricFamily("obsmask_mcp_strings_cut", "Long strings cut in MCP "
                                  "answers.", value=m.strings_cut)


def _by_feature(name: str, documentation: str, conversation: int, mcp: int) -> Metric:
    """A counter of tokens with one value for each feature."""
    counter = CounterMetricFamily(name, documentation, labels=["feature"])
    counter.add_metric(["conversation"], conversation)
    counter.add_metric(["mcp"], mcp)
    return counter


def _refetch_metrics(f: RefetchFigures) -> Iterator[Metric]:
    """What masking made the agent do again: the calls it repeated once
    their result was masked, and what they cost."""
    calls = CounterMetricFamily(
        "obsmask_refetches", "Tool calls the model made again after obsmask had masked the "
        "earlier same call's result (same tool, same arguments), by tool.", labels=["tool"])
    for tool, number in sorted(f.tools.items()):
        calls.add_metric([tool], number)
    yield calls
    yield CounterMetricFamily(
        "obsmask_refetch_result_tokens", "Tokens of the results of the re-fetched calls "
        "(characters / 4): what the model read again.", value=f.result_tokens)
    yield CounterMetricFamily(
        "obsmask_refetch_extra_turns", "Model answers that made nothing but re-fetches: "
        "turns the agent would not have needed.", value=f.extra_turns)
    yield CounterMetricFamily(
        "obsmask_refetch_guarded_results", "Tool results kept whole because their call was "
        "re-fetched (refetch_guard), summed over requests.", value=f.guarded_results)


def _brake_metrics(f: BrakeFigures) -> Iterator[Metric]:
    """The provider's brake: its cache figures against the ledger's."""
    yield GaugeMetricFamily(
        "obsmask_provider_surprise_tokens", "What the provider's cache read short of the "
        "ledger's prediction cost again, summed over answers (estimated input tokens at the "
        "base price; only clear shortfalls masking may have caused).", value=f.surprise)
    yield CounterMetricFamily(
        "obsmask_provider_brakes", "Conversations whose frontier the provider brake "
        "stopped (their bill so far, as reported, past the allowance).", value=f.tripped)
    yield CounterMetricFamily(
        "obsmask_provider_braked_requests", "Answers weighed after their conversation's "
        "frontier was stopped by the provider brake.", value=f.braked_requests)


def _turn_metrics(f: TurnFigures) -> Iterator[Metric]:
    """The saving on cold turns (after the cache's lifetime) apart from warm ones."""
    requests = CounterMetricFamily(
        "obsmask_turn_requests", "Conversation requests with a bill, by turn: cold (back "
        "after the provider's cache had expired, billed whole masked or not) or warm.",
        labels=["turn"])
    saved = GaugeMetricFamily(
        "obsmask_turn_saved_tokens", "What masking saved on those requests by the ledger's "
        "estimate (input tokens at the base price; below 0 where it re-billed more), by "
        "turn.", labels=["turn"])
    for name, kind in (("cold", f.cold), ("warm", f.warm)):
        requests.add_metric([name], kind.requests)
        saved.add_metric([name], kind.saved)
    yield requests
    yield saved


class Metrics:
    """One proxy's registry: the totals' collector and the masking time."""

    def __init__(self, totals: Totals, mask_seconds: Histogram | None = None,
                 host: tuple[Collector, ...] = (), gc_pauses: GcPauses | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(TotalsCollector(totals))
        # The process's figures, read at each scrape (/proc/self/stat,
        # gc.get_stats()); made once per proxy (they register themselves),
        # and registered again in each reading.
        if not host:
            host = (ProcessCollector(registry=self.registry),
                    GCCollector(registry=self.registry))
        else:
            for collector in host:
                self.registry.register(collector)
        self.host = host
        # And the collector's time, timed while the proxy runs (``RunTotals``:
        # running to done).
        self.gc_pauses = gc_pauses if gc_pauses is not None else GcPauses()
        self.registry.register(self.gc_pauses)
        if mask_seconds is None:
            mask_seconds = Histogram(
                "obsmask_mask_seconds", "Time the request rewrite took (parse, plan, splice, "
                "verify), per conversation request.", buckets=MASK_SECONDS_BUCKETS,
                registry=None)
        self.registry.register(mask_seconds)
        self.mask_seconds = mask_seconds

    def reading(self, totals: Totals) -> Metrics:
        """The same metrics read from other totals (the run's, with the
        flows still open added), the masking time as it is."""
        return Metrics(totals, self.mask_seconds, self.host, self.gc_pauses)

    def observe_mask_ms(self, mask_ms: float) -> None:
        self.mask_seconds.observe(mask_ms / 1000)

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)
