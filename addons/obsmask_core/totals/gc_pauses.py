"""What the garbage collector costs the proxy, per generation: the figures
Prometheus' own ``GCCollector`` does not give (it counts the collections,
not their time).

A collection holds the GIL, so while it runs mitmproxy's event loop and
every flow on it wait. Two clocks, for two questions: the CPU time the
collections took (the collecting thread's, ``time.thread_time``: what the
proxy spent on its collector, beside its ``process_cpu_seconds_total``),
and the longest one as a wall-clock time (the longest stall it made, which
also counts a finaliser that let other threads run, or the process being
descheduled). The times come from ``gc.callbacks`` (both clocks read when
a collection starts and when it stops) and are turned into metrics only
when scraped: the callback runs inside the collector, where taking a lock
(a metric's) could wait on the very thread that collects.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

GENERATIONS = 3


class GcPauses(Collector):
    """The collector's time while ``start``ed: ``obsmask_gc_cpu_seconds_total``
    and ``obsmask_gc_longest_pause_seconds``, per generation."""

    def __init__(self, cpu_clock: Callable[[], float] = time.thread_time,
                 wall_clock: Callable[[], float] = time.perf_counter) -> None:
        self._cpu_clock, self._wall_clock = cpu_clock, wall_clock
        # (CPU, wall) when the collection under way started.
        self._started: tuple[float, float] | None = None
        self.cpu_seconds = [0.0] * GENERATIONS
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
            self._started = (self._cpu_clock(), self._wall_clock())
            return
        started, self._started = self._started, None
        generation = info.get("generation", -1)
        if started is None or not 0 <= generation < GENERATIONS:
            return  # started before start(), or a generation this does not know
        self.cpu_seconds[generation] += self._cpu_clock() - started[0]
        stall = self._wall_clock() - started[1]
        if stall > self.longest[generation]:
            self.longest[generation] = stall

    def collect(self) -> Iterator[Metric]:
        # Copied before anything is allocated here (a collection may run
        # meanwhile): the longest first, so that a collection between the
        # two copies can only add to the sums.
        longest, cpu_seconds = list(self.longest), list(self.cpu_seconds)
        cpu = CounterMetricFamily(
            "obsmask_gc_cpu_seconds", "CPU time the garbage collector took (holding the "
            "interpreter, and the event loop), per generation.", labels=["generation"])
        stall = GaugeMetricFamily(
            "obsmask_gc_longest_pause_seconds", "The longest single collection so far, "
            "wall-clock, per generation: the longest stall the collector made.",
            labels=["generation"])
        for generation in range(GENERATIONS):
            cpu.add_metric([str(generation)], cpu_seconds[generation])
            stall.add_metric([str(generation)], longest[generation])
        yield cpu
        yield stall
