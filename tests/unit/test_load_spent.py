"""The load benchmark's account of where obsmask's CPU went in a phase: its
rewrites and its garbage collections, as its own metrics report them,
read before and after the phase; the rest is mitmproxy's and the other
hooks'."""

from __future__ import annotations

from benchlib.load.cases import Tally
from benchlib.load.proxy_metrics import Spent, spent
from benchlib.load.shapes import shape_report, versus_report
from benchlib.load.speed import LoadFigures
from obsmask_core.totals.metrics import Metrics
from obsmask_core.totals.totals import Totals
from support.metrics_text import collect_while_timed


def test_what_the_proxy_spent_is_read_from_its_metrics_text():
    metrics = Metrics(Totals())
    metrics.observe_mask_ms(2.5)
    metrics.observe_mask_ms(1.5)
    collect_while_timed(metrics)
    found = spent(metrics.exposition().decode())
    assert found.mask_seconds == 0.004
    # Each generation's CPU time, as the collector timed it.
    assert found.gc_cpu == {str(generation): seconds for generation, seconds
                            in enumerate(metrics.gc_pauses.cpu_seconds)}
    assert sum(found.gc_cpu.values()) > 0
    assert found.gc_collections["2"] >= 1


def test_a_phase_counts_what_was_spent_between_its_two_readings_and_phases_add_up():
    before = Spent(1.0, {"0": 0.5, "1": 0.25, "2": 0.0}, {"0": 10, "1": 2, "2": 0})
    after = Spent(3.0, {"0": 0.75, "1": 0.5, "2": 1.0}, {"0": 30, "1": 4, "2": 1})
    phase = after.since(before)
    assert phase == Spent(2.0, {"0": 0.25, "1": 0.25, "2": 1.0}, {"0": 20, "1": 2, "2": 1})
    assert phase.plus(phase) == Spent(4.0, {"0": 0.5, "1": 0.5, "2": 2.0},
                                      {"0": 40, "1": 4, "2": 2})


def test_an_obsmask_that_does_not_time_its_collector_has_no_collector_time_not_a_zero():
    found = spent("# TYPE obsmask_mask_seconds histogram\nobsmask_mask_seconds_sum 0.5\n")
    assert (found.mask_seconds, found.gc_cpu) == (0.5, None)
    assert found.plus(Spent(1.0, {"0": 2.0}, {})).gc_cpu is None
    assert Spent(1.0, {"0": 2.0}, {}).since(found).gc_cpu is None


def _figures(requests: int, seconds: float, cpu: float, *spent: Spent | None) -> LoadFigures:
    """Figures of one phase per ``spent`` (plain mitmproxy: none given)."""
    figures = LoadFigures()
    for phase in spent or (None,):
        figures.add({"chat": Tally(requests=requests, seconds=[0.01] * requests)}, seconds,
                    cpu, 1.0, phase)
    return figures


def test_each_obsmask_of_a_shape_says_what_its_rewrites_and_collector_by_generation_took():
    obsmask = _figures(100, 2.0, 0.25, Spent(0.1, {"0": 0.015, "1": 0.005, "2": 0.005}, {}))
    report = shape_report({"chat": {"plain": _figures(100, 1.0, 0.125),
                                    "obsmask": obsmask}}, {})
    assert report["chat"]["obsmask"]["cpu_ms_per_request_by_obsmask_metrics"] == {
        "all": 2.5, "rewrites": 1.0, "garbage_collector": 0.25,
        "garbage_collector_by_generation": {"0": 0.15, "1": 0.05, "2": 0.05}, "rest": 1.25}
    assert "cpu_ms_per_request_by_obsmask_metrics" not in report["chat"]["plain"]
    older = _figures(100, 2.0, 0.2, Spent(0.05, None, {}))  # no collector time
    versus = versus_report({"chat": {"plain": _figures(100, 1.0, 0.125),
                                     "obsmask": obsmask, "versus": older}})
    assert versus["chat"]["versus"]["cpu_ms_per_request_by_obsmask_metrics"] == {
        "all": 2.0, "rewrites": 0.5}


def test_no_split_is_given_when_the_metrics_missed_a_phase():
    """Sums over some phases divided by every phase's requests would
    understate each part."""
    figures = _figures(100, 2.0, 0.25, Spent(0.1, {"0": 0.025}, {}), None)
    report = shape_report({"chat": {"plain": _figures(100, 1.0, 0.125),
                                    "obsmask": figures}}, {})
    assert "cpu_ms_per_request_by_obsmask_metrics" not in report["chat"]["obsmask"]
