"""Medians of timed runs, with time.perf_counter."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping

Action = Callable[[], object]


def time_once(action: Action) -> float:
    """Seconds one call of ``action`` takes."""
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def median_ms(action: Action, repeat: int) -> float:
    """The median in ms of ``repeat`` timed runs (no untimed run first)."""
    return statistics.median(time_once(action) * 1000 for _ in range(repeat))


def medians_ms(actions: dict[str, Action], repeat: int | None,
               budget: float, minimum: int, maximum: int,
               before: Mapping[str, Action] | None = None) -> tuple[dict[str, float], int]:
    """The median in ms of ``repeat`` timed runs of each action, the actions
    taking turns so that a change in the machine's load falls on all of them.
    Adaptive when ``repeat`` is None: as many as fit in ``budget`` seconds
    for the slowest action, within [minimum, maximum]. One untimed run of
    each comes first, and counts as a sample when the slowest took longer
    than the budget (there is nothing to warm up in runs that long). An
    action named in ``before`` has that one run, untimed, before each of
    its runs."""
    def timed(name: str) -> float:
        if before is not None and name in before:
            before[name]()
        return time_once(actions[name])

    firsts = {name: timed(name) for name in actions}
    slowest = max(firsts.values())
    if repeat is None:
        repeat = max(minimum, min(maximum, int(budget / max(slowest, 1e-6))))
    samples: dict[str, list[float]] = {
        name: [first * 1000] if slowest >= budget else [] for name, first in firsts.items()}
    while any(len(runs) < repeat for runs in samples.values()):
        for name in actions:
            if len(samples[name]) < repeat:
                samples[name].append(timed(name) * 1000)
    return {name: statistics.median(runs) for name, runs in samples.items()}, repeat
