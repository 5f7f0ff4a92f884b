"""What obsmask's own metrics (``/obsmask/metrics``) say a mitmdump spent:
its garbage collections, the CPU time they took, and the time its request
rewrites took. Read straight from the proxy, whatever http_proxy the
environment names; None where the route did not answer (its totals
switched off, say)."""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client.parser import text_string_to_metric_families

# Collections are counted, their CPU time is in seconds.
Number = TypeVar("Number", int, float)


def _by_generation(first: Mapping[str, Number], second: Mapping[str, Number],
                   sign: int) -> dict[str, Number]:
    """``first`` plus (``sign`` 1) or minus (-1) ``second``, generation by
    generation (a generation one of them lacks counting as 0)."""
    return {generation: first.get(generation, 0) + sign * second.get(generation, 0)
            for generation in {*first, *second}}


def _timed_by_generation(first: dict[str, float] | None, second: dict[str, float] | None,
                         sign: int) -> dict[str, float] | None:
    """``_by_generation`` of two collector timings; None when either is
    (an obsmask that does not time its collector)."""
    if first is None or second is None:
        return None
    return _by_generation(first, second, sign)


@dataclass(frozen=True)
class Spent:
    """Sums since the proxy started: seconds of rewrites (``obsmask_mask_seconds``);
    the CPU seconds of garbage collection by generation
    (``obsmask_gc_cpu_seconds_total``; None from an obsmask without that
    metric, an older checkout); and the collections by generation."""

    mask_seconds: float
    gc_cpu: dict[str, float] | None
    gc_collections: dict[str, int]

    def plus(self, other: Spent) -> Spent:
        return Spent(self.mask_seconds + other.mask_seconds,
                     _timed_by_generation(self.gc_cpu, other.gc_cpu, 1),
                     _by_generation(self.gc_collections, other.gc_collections, 1))

    def since(self, before: Spent) -> Spent:
        return Spent(self.mask_seconds - before.mask_seconds,
                     _timed_by_generation(self.gc_cpu, before.gc_cpu, -1),
                     _by_generation(self.gc_collections, before.gc_collections, -1))


def metrics_text(port: int) -> str:
    url = f"http://127.0.0.1:{port}/obsmask/metrics"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as answer:
        text: bytes = answer.read()
    return text.decode()


def spent(text: str) -> Spent:
    """The sums in ``text``, the Prometheus text format of ``/obsmask/metrics``."""
    mask = 0.0
    gc_cpu: dict[str, float] | None = None
    collections: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "obsmask_mask_seconds_sum":
                mask = sample.value
            elif sample.name == "obsmask_gc_cpu_seconds_total":
                gc_cpu = gc_cpu if gc_cpu is not None else {}
                gc_cpu[sample.labels["generation"]] = sample.value
            elif sample.name == "python_gc_collections_total":
                collections[sample.labels["generation"]] = int(sample.value)
    return Spent(mask, gc_cpu, collections)


def spent_by(port: int) -> Spent | None:
    """What the mitmdump with obsmask on ``port`` has spent so far."""
    try:
        return spent(metrics_text(port))
    except (OSError, ValueError):
        return None
