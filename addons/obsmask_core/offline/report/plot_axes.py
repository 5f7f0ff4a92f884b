"""The axes of the report's line plots (``obsmask_core.offline.report.svg``
draws them): the interval each axis shows, its ticks on steps of 1, 2 or 5
times a power of ten, their labels, and the map from data to pixels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

TICKS = 5
# Values closer than this (relative to their size) are drawn as one value.
MIN_SPAN = 1e-9


@dataclass(frozen=True)
class Scale:
    """An axis: a linear map from a data interval onto a pixel interval,
    with a tick every ``step`` from ``low`` to ``high``."""

    low: float
    high: float
    step: float
    start: float  # the pixel of ``low``
    end: float  # the pixel of ``high``

    def __call__(self, value: float) -> float:
        share = (value - self.low) / (self.high - self.low)
        return self.start + share * (self.end - self.start)

    @property
    def ticks(self) -> list[float]:
        count = round((self.high - self.low) / self.step)
        return [self.low + n * self.step for n in range(count + 1)]


def nice_step(span: float, count: int) -> float:
    """A tick step of 1, 2 or 5 times a power of ten giving about ``count``
    ticks over ``span``."""
    raw = span / max(1, count)
    power = 10.0 ** math.floor(math.log10(raw))
    for factor in (1.0, 2.0, 5.0, 10.0):
        if raw <= factor * power:
            return factor * power
    return 10.0 * power  # not reached: raw <= 10 * power by definition


def axis_range(values: Sequence[float], *, include_zero: bool,
               integer: bool) -> tuple[float, float, float]:
    """(low, high, tick step) of an axis that holds ``values``: bounds on
    whole steps, 0 inside when ``include_zero``, a step of at least 1 for
    whole numbers; never an empty interval."""
    low = min(values) if values else 0.0
    high = max(values) if values else 1.0
    if include_zero:
        low, high = min(low, 0.0), max(high, 0.0)
    if high - low <= MIN_SPAN * max(1.0, abs(low), abs(high)):
        # One value, or values too close to tell apart: an interval around
        # them, so a single request is still drawn.
        low, high = (min(low, 0.0), max(high, 1.0)) if include_zero else (low - 1.0, high + 1.0)
    step = nice_step(high - low, TICKS)
    if integer:
        step = max(1.0, math.ceil(step))
    bottom, top = math.floor(low / step) * step, math.ceil(high / step) * step
    # A division rounded the wrong way must not leave a value outside.
    if bottom > low:
        bottom -= step
    if top < high:
        top += step
    return bottom, top, step


def tick_label(value: float, step: float) -> str:
    """A tick's text: whole numbers with thousands separators, others with
    as many decimals as the step needs."""
    if float(value).is_integer() and float(step).is_integer():
        return f"{int(value):,}"
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 2
    return f"{value:,.{decimals}f}"
