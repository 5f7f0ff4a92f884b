"""What obsmask's own metrics (``/obsmask/metrics``) say a mitmdump spent:
its garbage collections, the CPU time they took, and the time its request
rewrites took. Read straight from the proxy, whatever http_proxy the
environment names; None where the route did not answer (its totals
switched off, say)."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


def _plus(first: float | None, second: float | None) -> float | None:
    return None if first is None or second is None else first + second


def _minus(first: float | None, second: float | None) -> float | None:
    return None if first is None or second is None else first - second


@dataclass(frozen=True)
class Spent:
    """Sums since the proxy started: seconds of rewrites (``obsmask_mask_seconds``)
    and of garbage collection (``obsmask_gc_cpu_seconds_total``, all
    generations; None from an obsmask without that metric, an older
    checkout), and the collections by generation."""

    mask_seconds: float
    gc_seconds: float | None
    gc_collections: dict[str, int]

    def plus(self, other: Spent) -> Spent:
        return Spent(self.mask_seconds + other.mask_seconds,
                     _plus(self.gc_seconds, other.gc_seconds),
                     {generation: self.gc_collections.get(generation, 0)
                      + other.gc_collections.get(generation, 0)
                      for generation in {*self.gc_collections, *other.gc_collections}})

    def since(self, before: Spent) -> Spent:
        return Spent(self.mask_seconds - before.mask_seconds,
                     _minus(self.gc_seconds, before.gc_seconds),
                     {generation: count - before.gc_collections.get(generation, 0)
                      for generation, count in self.gc_collections.items()})


def metrics_text(port: int) -> str:
    url = f"http://127.0.0.1:{port}/obsmask/metrics"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as answer:
        text: bytes = answer.read()
    return text.decode()


def spent(text: str) -> Spent:
    """The sums in ``text``, the Prometheus text format of ``/obsmask/metrics``."""
    mask = 0.0
    gc_seconds: float | None = None
    collections: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "obsmask_mask_seconds_sum":
                mask = sample.value
            elif sample.name == "obsmask_gc_cpu_seconds_total":
                gc_seconds = (gc_seconds or 0.0) + sample.value
            elif sample.name == "python_gc_collections_total":
                collections[sample.labels["generation"]] = int(sample.value)
    return Spent(mask, gc_seconds, collections)


def spent_by(port: int) -> Spent | None:
    """What the mitmdump with obsmask on ``port`` has spent so far."""
    try:
        return spent(metrics_text(port))
    except (OSError, ValueError):
        return None
