"""The collector's time in the metrics: how long garbage collections held
the interpreter (and so the event loop), per generation."""

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
    timed = GcPauses(SteppingClock())
    yield timed
    timed.stop()


def test_a_collection_while_started_adds_its_time_to_its_generation(pauses):
    pauses.start()
    gc.collect(1)
    assert pauses.seconds[1] >= 1.0 and pauses.longest[1] == 1.0
    assert pauses.seconds[2] == 0.0  # other generations are not charged


def test_nothing_is_timed_before_start_or_after_stop(pauses):
    gc.collect(2)
    assert pauses.seconds == [0.0, 0.0, 0.0]
    pauses.start()
    pauses.stop()
    gc.collect(2)
    assert pauses.seconds == [0.0, 0.0, 0.0]
    assert pauses._callback not in gc.callbacks


def test_starting_twice_times_each_collection_once(pauses):
    pauses.start()
    pauses.start()
    assert gc.callbacks.count(pauses._callback) == 1
    gc.collect(2)
    assert pauses.seconds[2] == 1.0


def test_the_longest_pause_is_the_longest_single_collection_not_the_sum():
    clock = SteppingClock()
    pauses = GcPauses(clock)
    for step in (1.0, 3.0, 2.0):
        clock.step = step
        pauses._callback("start", {"generation": 0})
        pauses._callback("stop", {"generation": 0, "collected": 0, "uncollectable": 0})
    assert pauses.seconds[0] == 6.0 and pauses.longest[0] == 3.0


@pytest.mark.parametrize("phases", [
    [("stop", {"generation": 0})],  # a stop whose start came before start()
    [("start", {"generation": 5}), ("stop", {"generation": 5})],  # a generation it does not know
    [("start", {}), ("stop", {})],  # no generation given
])
def test_what_the_callback_cannot_place_is_left_out_without_an_error(phases):
    pauses = GcPauses(SteppingClock())
    for phase, info in phases:
        pauses._callback(phase, info)
    assert pauses.seconds == [0.0, 0.0, 0.0] and pauses.longest == [0.0, 0.0, 0.0]


def test_the_metrics_give_the_collectors_time_and_longest_pause_per_generation():
    metrics = Metrics(Totals())
    collect_while_timed(metrics)
    values = exposition_values(metrics.exposition().decode())
    assert values['python_gc_pause_seconds_total{generation="2"}'] > 0
    assert values['python_gc_longest_pause_seconds{generation="2"}'] > 0
    assert values['python_gc_longest_pause_seconds{generation="2"}'] \
        <= values['python_gc_pause_seconds_total{generation="2"}']
    assert {'python_gc_pause_seconds_total{generation="0"}',
            'python_gc_pause_seconds_total{generation="1"}'} <= set(values)
    # A reading (the run's totals with the open flows) has the same figures.
    reading = metrics.reading(Totals())
    assert reading.gc_pauses is metrics.gc_pauses
    assert exposition_values(reading.exposition().decode())[
        'python_gc_pause_seconds_total{generation="2"}'] \
        == values['python_gc_pause_seconds_total{generation="2"}']
