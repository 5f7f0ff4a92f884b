"""The Prometheus text format read back, and the collector timed, for the
tests of the metrics."""

from __future__ import annotations

import gc

from obsmask_core.totals.metrics import Metrics


def exposition_values(text: str) -> dict[str, float]:
    """Sample lines of the Prometheus text format, by name and labels."""
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def collect_while_timed(metrics: Metrics, generation: int = 2) -> None:
    """One garbage collection of ``generation`` while ``metrics`` times them."""
    metrics.gc_pauses.start()
    try:
        gc.collect(generation)
    finally:
        metrics.gc_pauses.stop()
