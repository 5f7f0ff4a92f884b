"""The peers bench's figures: one JSON document, and a Markdown table per
proxy.

Per proxy that ran, against "none" (the client talking to the upstream
itself) on the same requests of the same run:

- ``bill``: per price model of ``obsmask_core.offline.cache.billing`` (under
  its name in bench_cache's output), the mean and max of
  the sessions' final ratios (the session's cost over none's), the ratio of
  the summed costs (``total``), and the worst bill so far: the highest ratio
  of the cost so far to none's after any request from the 8th on
  (``obsmask_core.offline.cache.so_far``), with its session and request;
  ``bill_by_format``: the mean final ratio of each format's sessions;
- ``input_tokens``: the tokens of every forwarded request, as bench_cache
  counts them (cl100k_base), and their ratio to none's;
- ``changes``: requests with a change outside tool-result contents, per
  category (``benchlib.peers.changes``), with examples;
- ``cache_instability``: tool results whose bytes changed from one request
  to the next (``benchlib.peers.stability``);
- ``latency_ms``: each request's time as the client saw it, median and p95,
  and the time added over none's for the same request (median, p95);
- ``cpu_ms_per_request``: the proxy process's CPU time (its threads and
  children, from /proc) over the run, per request.

A proxy that could not run is reported with the reason, and no figure.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from benchlib.peers.changes import CATEGORIES
from benchlib.peers.proxies import NONE, OBSMASK
from benchlib.peers.run import PeersRun, ProxyRun
from obsmask_core.offline.cache.billing import (
    BENCHMARK_NAMES,
    SETTINGS_MODELS,
    benchmark_name,
    model_description,
)
from obsmask_core.offline.cache.so_far import FIRST_JUDGED_REQUEST, worst_so_far

Json = dict[str, object]
_DIGITS = 4


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _ms(value: float) -> float:
    return round(value * 1000, 2)


def _bill(run: ProxyRun, baseline: ProxyRun) -> tuple[Json, Json]:
    reference = {figures.name: figures.bill for figures in baseline.sessions}
    bill: Json = {}
    by_format: dict[str, Json] = {}
    for model in SETTINGS_MODELS:
        name = benchmark_name(model)
        finals: list[tuple[float, str]] = []
        worst: tuple[float, str] | None = None
        cost = base = 0.0
        formats: dict[str, list[float]] = {}
        for figures in run.sessions:
            other = reference[figures.name]
            cost += figures.bill.cost[model.name]
            base += other.cost[model.name]
            if other.cost[model.name]:
                ratio = figures.bill.cost[model.name] / other.cost[model.name]
                finals.append((ratio, figures.name))
                formats.setdefault(figures.fmt, []).append(ratio)
            found = worst_so_far(figures.bill.so_far[model.name], other.so_far[model.name])
            if found is not None and (worst is None or found[0] > worst[0]):
                worst = (found[0], f"{figures.name}#{found[1]}")
        mean = statistics.fmean(r for r, _ in finals) if finals else None
        bill[name] = {
            "final_mean": round(mean, _DIGITS) if mean is not None else None,
            "final_max": round(max(finals)[0], _DIGITS) if finals else None,
            "final_max_session": max(finals)[1] if finals else None,
            "total": round(cost / base, _DIGITS) if base else None,
            "worst_so_far": round(worst[0], _DIGITS) if worst else None,
            "worst_so_far_at": worst[1] if worst else None,
        }
        for fmt, ratios in formats.items():
            by_format.setdefault(fmt, {})[name] = round(statistics.fmean(ratios), _DIGITS)
    return bill, dict(by_format)


def _latency(run: ProxyRun, baseline: ProxyRun) -> Json:
    seconds = run.seconds
    if not seconds:
        return {}
    added = [mine - theirs for mine, theirs in zip(seconds, baseline.seconds, strict=True)]
    return {"median": _ms(statistics.median(seconds)), "p95": _ms(_percentile(seconds, 0.95)),
            "added_median": _ms(statistics.median(added)),
            "added_p95": _ms(_percentile(added, 0.95))}


def proxy_figures(run: ProxyRun, baseline: ProxyRun) -> Json:
    proxy = run.proxy
    if proxy.unavailable is not None:
        return {"status": "unavailable", "reason": proxy.unavailable}
    bill, by_format = _bill(run, baseline)
    tokens = sum(figures.bill.input_tokens for figures in run.sessions)
    reference = sum(figures.bill.input_tokens for figures in baseline.sessions)
    requests = len(run.seconds)
    stability = run.stability
    return {
        "status": "ran",
        "version": proxy.version,
        "requests": requests,
        "errors": run.errors,
        "error_examples": run.error_examples,
        "answered_without_upstream": run.answered_without_upstream,
        "extra_upstream_requests": run.extra_upstream_requests,
        "bill": bill,
        "bill_by_format": by_format,
        "input_tokens": {"total": tokens,
                         "ratio": round(tokens / reference, _DIGITS) if reference else None},
        "changes": {
            "requests_compared": run.changes.requests,
            "requests_changed_outside_tool_results": run.changes.changed_outside_results,
            "by_category": {c: run.changes.counts[c] for c in CATEGORIES},
            "examples": run.changes.examples,
        },
        "cache_instability": {
            "tool_results": stability.results,
            "results_changed": stability.results_changed,
            "changes": stability.changes,
            "results_changed_more_than_once": stability.results_changed_more_than_once,
            "results_restored": stability.results_restored,
        },
        "latency_ms": _latency(run, baseline),
        "cpu_ms_per_request": (round(run.cpu_seconds * 1000 / requests, 2)
                               if run.cpu_seconds is not None and requests else None),
    }


# Columns where obsmask is compared with each peer that ran: (label, path in
# a proxy's figures); lower is better in every one.
def comparison_columns() -> list[tuple[str, tuple[str, ...]]]:
    columns = [(f"bill {m} (final mean)", ("bill", m, "final_mean")) for m in BENCHMARK_NAMES]
    columns += [(f"bill {m} (worst so far)", ("bill", m, "worst_so_far"))
                for m in BENCHMARK_NAMES]
    return [*columns,
            ("input tokens", ("input_tokens", "ratio")),
            ("requests changed outside tool results",
             ("changes", "requests_changed_outside_tool_results")),
            ("answers changed", ("changes", "by_category", "answers")),
            ("tool results changed more than once",
             ("cache_instability", "results_changed_more_than_once")),
            ("added latency median (ms)", ("latency_ms", "added_median")),
            ("added latency p95 (ms)", ("latency_ms", "added_p95")),
            ("CPU per request (ms)", ("cpu_ms_per_request",))]


def _at(figures: object, path: tuple[str, ...]) -> float | None:
    for key in path:
        figures = figures.get(key) if isinstance(figures, dict) else None
    return float(figures) if isinstance(figures, int | float) else None


def comparison(proxies: dict[str, Json]) -> dict[str, Json]:
    """Per column: obsmask's value, each peer's, and whether obsmask is ahead
    of (or level with) every peer that ran."""
    mine = proxies.get(OBSMASK, {})
    peers = {name: figures for name, figures in proxies.items()
             if name not in (NONE, OBSMASK) and figures.get("status") == "ran"}
    out: dict[str, Json] = {}
    if mine.get("status") != "ran" or not peers:
        return out
    for label, path in comparison_columns():
        value = _at(mine, path)
        theirs = {name: _at(figures, path) for name, figures in peers.items()}
        known = [v for v in theirs.values() if v is not None]
        out[label] = {"obsmask": value, **theirs,
                      "obsmask_ahead_or_level": (value is not None and bool(known)
                                                 and all(value <= v for v in known))}
    return out


def json_report(run: PeersRun, context: Json) -> Json:
    baseline = run.runs[NONE]
    proxies = {name: proxy_figures(proxy_run, baseline) for name, proxy_run in run.runs.items()}
    return {
        **context,
        "sessions": run.sessions,
        "requests_per_proxy": run.requests,
        "first_judged_request": FIRST_JUDGED_REQUEST,
        "price_models": {benchmark_name(m): model_description(m) for m in SETTINGS_MODELS},
        "proxies": proxies,
        "comparison": comparison(proxies),
        "elapsed_s": round(run.seconds, 1),
    }


def _cell(value: object, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}{suffix}"
    return f"{value}{suffix}"


def markdown(report: Json) -> str:
    """Two tables, one row per proxy: the bill, then the rest."""
    proxies = report["proxies"]
    assert isinstance(proxies, dict)
    head = ["proxy", *(f"{m} final / worst so far" for m in BENCHMARK_NAMES)]
    bill_rows = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * len(BENCHMARK_NAMES)]
    rest_head = ["proxy", "input tokens", "changed outside tool results (requests)",
                 "breakpoints added", "answers changed", "results changed / more than once",
                 "added ms p50 / p95", "CPU ms/request", "errors"]
    rest_rows = ["| " + " | ".join(rest_head) + " |",
                 "| --- |" + " ---: |" * (len(rest_head) - 1)]
    for name, figures in proxies.items():
        if figures.get("status") != "ran":
            reason = figures.get("reason")
            bill_rows.append(f"| {name} | {reason} |" + " |" * (len(BENCHMARK_NAMES) - 1))
            rest_rows.append(f"| {name} | {reason} |" + " |" * (len(rest_head) - 2))
            continue
        bill = figures["bill"]
        bill_rows.append(f"| {name} | " + " | ".join(
            f"{_cell(bill[m]['final_mean'], 'x')} / {_cell(bill[m]['worst_so_far'], 'x')}"
            for m in BENCHMARK_NAMES) + " |")
        changes, unstable = figures["changes"], figures["cache_instability"]
        latency = figures["latency_ms"]
        rest_rows.append("| " + " | ".join([
            name, _cell(figures["input_tokens"]["ratio"], "x"),
            f"{changes['requests_changed_outside_tool_results']} / {changes['requests_compared']}",
            _cell(changes["by_category"]["breakpoints_added"]),
            _cell(changes["by_category"]["answers"]),
            f"{unstable['results_changed']} / {unstable['results_changed_more_than_once']}",
            f"{_cell(latency.get('added_median'))} / {_cell(latency.get('added_p95'))}",
            _cell(figures["cpu_ms_per_request"]),
            _cell(figures["errors"] + figures["answered_without_upstream"]),
        ]) + " |")
    return "\n".join([*bill_rows, "", *rest_rows])
