"""The load benchmark per shape of conversation traffic: after the mixed
rounds, a load phase of each shape alone (``mix.SHAPE_KINDS``: ``chat``,
``anthropic``, ``responses``, ``claude_code``, each its JSON and its
event-stream kind), the proxies taking turns, so that the CPU time per
request and the requests per second of each proxy are those of one shape.

- ``shape_report``: each shape's figures for both proxies, the ratios
  obsmask / plain, and issue 43's targets (CPU per request at most 2x
  plain mitmproxy's, requests per second at least 0.5x), each with its
  value and whether it is met (reported, never enforced);
- ``versus_report``: with ``--versus``, each shape's figures for plain
  mitmproxy, obsmask and obsmask at another checkout, and the ratios of
  each obsmask to plain and of this one to the other;
- ``replay_reuse``: the same traffic of one shape masked in this process
  (a fresh mix, as many agents as the phase has clients, their requests
  interleaved as the clients send them, one masker with the proxy's
  settings): how many requests were masked, and of those how many were
  made from the previous request's masked body (``reused``), which no
  figure of the proxy says. All the clients: with more conversations
  going on than the masker keeps parsed bodies for, a request takes
  other paths (Claude Code's most of all), as it does in the proxy.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import orjson

from benchlib.load.bodies import Bodies
from benchlib.load.mix import SHAPE_KINDS, Mix
from benchlib.load.proxy_metrics import Spent
from benchlib.load.speed import LoadFigures, load_ratios, percentile, ratio, target
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat

SHAPE_FORMATS: dict[str, WireFormat] = {
    "chat": CHAT, "anthropic": ANTHROPIC, "responses": RESPONSES, "claude_code": ANTHROPIC}


def _figures(f: LoadFigures) -> dict[str, object]:
    every = [s for values in f.latencies.values() for s in values]
    return {
        "requests": f.requests,
        "seconds": round(f.seconds, 2),
        "requests_per_s": round(f.requests / f.seconds, 1) if f.seconds else 0.0,
        "cpu_ms_per_request": (round(f.cpu_seconds * 1000 / f.requests, 3)
                               if f.requests else 0.0),
        "benchmark_process_cpu_s": round(f.client_cpu_seconds, 2),
        "latency_p50_ms": round(percentile(every, 0.5) * 1000, 2),
        "latency_p99_ms": round(percentile(every, 0.99) * 1000, 2),
        **({"cpu_ms_per_request_by_obsmask_metrics": _parts(f, spent)}
           if (spent := f.spent_in_every_phase()) is not None and f.requests else {}),
    }


def _parts(f: LoadFigures, spent: Spent) -> dict[str, object]:
    """The CPU per request, and what obsmask's metrics account for of it:
    its request rewrites (their time, which inline is the event loop's CPU)
    and its garbage collections, also by generation (left out, with the
    rest, by an obsmask that does not time them); the rest is mitmproxy's
    and obsmask's other hooks."""
    cpu, masking = f.cpu_seconds * 1000 / f.requests, spent.mask_seconds * 1000 / f.requests
    parts: dict[str, object] = {"all": round(cpu, 3), "rewrites": round(masking, 3)}
    if spent.gc_cpu is not None:
        collector = sum(spent.gc_cpu.values()) * 1000 / f.requests
        parts |= {"garbage_collector": round(collector, 3),
                  "garbage_collector_by_generation": {
                      generation: round(seconds * 1000 / f.requests, 3)
                      for generation, seconds in sorted(spent.gc_cpu.items())},
                  "rest": round(cpu - masking - collector, 3)}
    return parts


@dataclass(frozen=True)
class ReuseCount:
    """A shape's traffic masked in process."""

    requests: int
    outcomes: dict[str, int]  # by outcome: Masked, Unchanged...
    reused: int  # masked requests made from the previous request's masked body
    mask_ms: float  # in all
    orjson_ms: float  # an orjson round trip of every body, in all

    def as_json(self) -> dict[str, object]:
        masked = self.outcomes.get("Masked", 0)
        return {
            "requests": self.requests, "outcomes": self.outcomes, "masked": masked,
            "reused": self.reused,
            "reused_of_masked": round(self.reused / masked, 3) if masked else None,
            "mask_ms_per_request": round(self.mask_ms / self.requests, 3) if self.requests
            else None,
            "mask_over_orjson": ratio(self.mask_ms, self.orjson_ms),
        }


def _replay(mix: Mix, shape: str, agents: int, per_client: int,
            policy: MaskPolicy) -> ReuseCount:
    kinds = list(SHAPE_KINDS[shape])
    fmt = SHAPE_FORMATS[shape]
    masker = Masker(policy)
    outcomes: Counter[str] = Counter()
    reused = 0
    mask_s = orjson_s = 0.0
    for i in range(per_client):
        for c in range(agents):
            body = mix.request(c * per_client + i, c + i, kinds, client=c).body
            started = time.perf_counter()
            outcome = masker.mask(body, fmt)
            masked_at = time.perf_counter()
            orjson.dumps(orjson.loads(body))
            mask_s += masked_at - started
            orjson_s += time.perf_counter() - masked_at
            outcomes[type(outcome).__name__] += 1
            reused += isinstance(outcome, Masked) and outcome.reused
    return ReuseCount(agents * per_client, dict(sorted(outcomes.items())), reused,
                      mask_s * 1000, orjson_s * 1000)


def replay_reuse(bodies: Bodies, mode: str, shapes: list[str], clients: int, per_client: int,
                 policy: MaskPolicy) -> dict[str, ReuseCount]:
    """For each of ``shapes``: ``clients`` agents (the phase's clients)
    sending ``per_client`` requests of the shape each, as its load phase
    sends them (a fresh mix in ``mode``), one request of each in turn,
    masked by a masker of its own under ``policy``."""
    mix = Mix(bodies, cuts=True, mode=mode, clients=clients, per_client=per_client)
    return {shape: _replay(mix, shape, clients, per_client, policy) for shape in shapes}


def shape_report(figures: dict[str, dict[str, LoadFigures]],
                 replayed: dict[str, ReuseCount]) -> dict[str, object]:
    """shape -> its kinds, each proxy's figures, the ratios obsmask /
    plain, the targets, and (when replayed) its reuse in process."""
    report: dict[str, object] = {}
    for shape, by_variant in figures.items():
        plain, obsmask = by_variant["plain"], by_variant["obsmask"]
        ratios = load_ratios(obsmask, plain)
        targets = {
            "cpu_per_request_obsmask_over_plain": target(ratios["cpu_per_request"], 2),
            "requests_per_s_obsmask_over_plain": target(ratios["requests_per_s"], 0.5, False),
        }
        report[shape] = {
            "kinds": list(SHAPE_KINDS[shape]),
            "plain": _figures(plain),
            "obsmask": _figures(obsmask),
            "ratios": ratios,
            "targets": targets,
            "targets_met": sum(bool(t["met"]) for t in targets.values()),
            "targets_total": len(targets),
            **({"reuse_replayed": replayed[shape].as_json()} if shape in replayed else {}),
        }
    return report


def versus_report(figures: dict[str, dict[str, LoadFigures]]) -> dict[str, object]:
    """shape -> the figures of ``plain``, ``obsmask`` and ``versus`` (obsmask
    at another checkout), and the ratios of CPU per request and of requests
    per second: each obsmask over plain, and obsmask over versus."""
    report: dict[str, object] = {}
    for shape, by_variant in figures.items():
        report[shape] = {
            **{name: _figures(f) for name, f in by_variant.items()},
            "ratios": {f"{over}_over_{under}": load_ratios(by_variant[over], by_variant[under])
                       for over, under in (("obsmask", "plain"), ("versus", "plain"),
                                           ("obsmask", "versus"))},
        }
    return report
