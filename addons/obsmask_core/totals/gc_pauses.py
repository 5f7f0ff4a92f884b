"""How long the garbage collector held the interpreter, per generation: the
process figure Prometheus' own ``GCCollector`` does not give (it counts the
collections, not their time).

A collection holds the GIL, so while it runs mitmproxy's event loop and
every flow on it wait: the sum is CPU time the proxy spent on the
collector, and the longest is the longest stall it made. The times come
from ``gc.callbacks`` (a clock read when a collection starts and when it
stops) and are turned into metrics only when scraped: the callback runs
inside the collector, where taking a lock (a metric's) could wait on the
very thread that collects.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

GENERATIONS = 3


class GcPauses(Collector):
    """The collector's time while ``start``ed: ``python_gc_pause_seconds_total``
    and ``python_gc_longest_pause_seconds``, per generation."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._started: float | None = None
        self.seconds = [0.0] * GENERATIONS
        self.longest = [0.0] * GENERATIONS

    def start(self) -> None:
        """Time every collection from now on (once, however often asked)."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
        self._started = None

    def _callback(self, phase: str, info: Mapping[str, int]) -> None:
        # Plain arithmetic only: this runs inside the collector.
        if phase == "start":
            self._started = self._clock()
            return
        started, self._started = self._started, None
        generation = info.get("generation", -1)
        if started is None or not 0 <= generation < GENERATIONS:
            return  # started before start(), or a generation this does not know
        took = self._clock() - started
        self.seconds[generation] += took
        if took > self.longest[generation]:
            self.longest[generation] = took

    def collect(self) -> Iterator[Metric]:
        seconds = CounterMetricFamily(
            "python_gc_pause_seconds", "Time the garbage collector held the interpreter "
            "(and the event loop), per generation.", labels=["generation"])
        longest = GaugeMetricFamily(
            "python_gc_longest_pause_seconds", "The longest single collection so far, per "
            "generation: the longest stall the collector made.", labels=["generation"])
        for generation in range(GENERATIONS):
            seconds.add_metric([str(generation)], self.seconds[generation])
            longest.add_metric([str(generation)], self.longest[generation])
        yield seconds
        yield longest
