"""The collector's time in the metrics, per generation: the CPU time its
collections took, and the longest one (a stall of the event loop)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from obsmask_core.totals.gc_pauses import GcPauses
from obsmask_core.totals.metrics import Metrics
from obsmask_core.totals.totals import Totals
from support.metrics_text import collect_while_timed, exposition_values


class SteppingClock:
    """A clock that moves one step (a second) each time it is read."""

    def __init__(self, step: float = 1.0) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture
def pauses() -> Iterator[GcPauses]:
    # A collection takes one second of CPU and two of wall-clock time.
    timed = GcPauses(SteppingClock(1.0), SteppingClock(2.0))
    yield timed
    timed.stop()


def test_a_collection_while_started_adds_its_cpu_time_and_its_stall_to_its_generation(pauses):
    pauses.start()
    gc.collect(1)
    assert pauses.cpu_seconds[1] == 1.0 and pauses.longest[1] == 2.0
    assert pauses.cpu_seconds[2] == 0.0  # other generations are not charged


def test_nothing_is_timed_before_start_or_after_stop(pauses):
    gc.collect(2)
    assert pauses.cpu_seconds == [0.0, 0.0, 0.0]
    pauses.start()
    pauses.stop()
    gc.collect(2)
    assert pauses.cpu_seconds == [0.0, 0.0, 0.0] and pauses.longest == [0.0, 0.0, 0.0]
    assert pauses._callback not in gc.callbacks


def test_starting_twice_times_each_collection_once(pauses):
    pauses.start()
    pauses.start()
    assert gc.callbacks.count(pauses._callback) == 1
    gc.collect(2)
    assert pauses.cpu_seconds[2] == 1.0


def test_the_longest_pause_is_the_longest_single_collection_not_the_sum():
    wall = SteppingClock()
    pauses = GcPauses(SteppingClock(0.5), wall)
    for step in (1.0, 3.0, 2.0):
        wall.step = step
        pauses._callback("start", {"generation": 0})
        pauses._callback("stop", {"generation": 0, "collected": 0, "uncollectable": 0})
    assert pauses.cpu_seconds[0] == 1.5 and pauses.longest[0] == 3.0


@pytest.mark.parametrize("phases", [
    [("stop", {"generation": 0})],  # a stop whose start came before start()
    [("start", {"generation": 5}), ("stop", {"generation": 5})],  # a generation it does not know
    [("start", {}), ("stop", {})],  # no generation given
])
def test_what_the_callback_cannot_place_is_left_out_without_an_error(phases):
    pauses = GcPauses(SteppingClock(), SteppingClock())
    for phase, info in phases:
        pauses._callback(phase, info)
    assert pauses.cpu_seconds == [0.0, 0.0, 0.0] and pauses.longest == [0.0, 0.0, 0.0]


def test_the_metrics_give_the_collectors_cpu_time_and_longest_pause_per_generation():
    metrics = Metrics(Totals())
    collect_while_timed(metrics)
    values = exposition_values(metrics.exposition().decode())
    assert values['obsmask_gc_cpu_seconds_total{generation="2"}'] \
        == metrics.gc_pauses.cpu_seconds[2] > 0
    assert values['obsmask_gc_longest_pause_seconds{generation="2"}'] \
        == metrics.gc_pauses.longest[2] > 0
    assert {'obsmask_gc_cpu_seconds_total{generation="0"}',
            'obsmask_gc_cpu_seconds_total{generation="1"}'} <= set(values)
    # A reading (the run's totals with the open flows) has the same figures.
    reading = metrics.reading(Totals())
    assert reading.gc_pauses is metrics.gc_pauses
    assert exposition_values(reading.exposition().decode())[
        'obsmask_gc_cpu_seconds_total{generation="2"}'] \
        == values['obsmask_gc_cpu_seconds_total{generation="2"}']


def test_a_collection_during_a_scrape_never_shows_a_longest_pause_without_its_time():
    """The two figures are copied one after the other, and a collection may
    run in between: the longest is copied first, so such a collection can
    only add to the CPU time shown, never show a stall whose time is left
    out. Here a collection, the longest so far, runs during the second copy."""
    wall = SteppingClock()
    pauses = GcPauses(SteppingClock(), wall)
    pauses._callback("start", {"generation": 0})
    pauses._callback("stop", {"generation": 0})
    copies = 0

    class CollectingOnSecondCopy(list[float]):
        def __iter__(self) -> Iterator[float]:
            nonlocal copies
            copies += 1
            if copies == 2:
                wall.step = 10.0
                pauses._callback("start", {"generation": 0})
                pauses._callback("stop", {"generation": 0})
            return super().__iter__()

    pauses.longest = CollectingOnSecondCopy(pauses.longest)
    pauses.cpu_seconds = CollectingOnSecondCopy(pauses.cpu_seconds)
    families = {family.name: family for family in pauses.collect()}
    cpu = families["obsmask_gc_cpu_seconds"].samples[0].value
    longest = families["obsmask_gc_longest_pause_seconds"].samples[0].value
    assert (cpu, longest) == (2.0, 1.0)  # both collections' CPU, the first one's stall
