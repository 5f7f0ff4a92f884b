"""Line plots as inline SVG, drawn by this module alone (no plotting library,
no script, no font to fetch), so the report is one file that opens offline.

A plot is a few series of (x, y) points in data units. The plot area is a
rectangle inside the picture; around it go the axes with their ticks and
labels, and above it the legend. The y axis always shows 0 (token counts and
bills are read against nothing, not against their smallest value). Every
point is drawn as a circle carrying its series and its values (``data-x``,
``data-y``), and a polyline joins the points of a series in the order of x,
so a test can read the plot back from the page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

Point = tuple[float, float]

# Colour-blind-safe (Okabe and Ito), in the order series are given.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
WIDTH = 640
HEIGHT = 320
MARGIN_LEFT = 78  # room for y tick labels such as "1,000,000" and the axis label
MARGIN_RIGHT = 18
MARGIN_BOTTOM = 52  # x tick labels and the axis label
LEGEND_LINE = 18
LEGEND_TOP = 8
# The legend is laid out without measuring text (there is no browser here):
# an average character of the 12 px sans-serif font is taken as 7 px wide.
CHAR_WIDTH = 7.0
LEGEND_SWATCH = 26
TICKS = 5
# Values closer than this (relative to their size) are drawn as one value.
MIN_SPAN = 1e-9


@dataclass(frozen=True)
class Series:
    """One line of a plot: its name (the legend's) and its points."""

    name: str
    points: tuple[Point, ...]
    dashed: bool = False


@dataclass(frozen=True)
class LinePlot:
    """What a plot shows: a title, the meaning of each axis, the series."""

    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    # x are counts (request numbers): ticks at whole numbers only.
    integer_x: bool = True

    @property
    def has_points(self) -> bool:
        return any(s.points for s in self.series)


@dataclass(frozen=True)
class Area:
    """The plot area, in pixels from the picture's top left corner."""

    left: float
    top: float
    width: float
    height: float

    @property
    def right(self) -> float:
        return self.left + self.width

    @property
    def bottom(self) -> float:
        return self.top + self.height

    def holds(self, point: Point) -> bool:
        x, y = point
        return self.left <= x <= self.right and self.top <= y <= self.bottom


@dataclass(frozen=True)
class Scale:
    """A linear map from a data interval onto a pixel interval."""

    low: float
    high: float
    start: float  # the pixel of ``low``
    end: float  # the pixel of ``high``

    def __call__(self, value: float) -> float:
        share = (value - self.low) / (self.high - self.low)
        return self.start + share * (self.end - self.start)


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


def ticks(low: float, high: float, step: float) -> list[float]:
    count = round((high - low) / step)
    return [low + n * step for n in range(count + 1)]


def tick_label(value: float, step: float) -> str:
    """A tick's text: whole numbers with thousands separators, others with
    as many decimals as the step needs."""
    if float(value).is_integer() and float(step).is_integer():
        return f"{int(value):,}"
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 2
    return f"{value:,.{decimals}f}"


def legend_rows(names: Sequence[str], width: float) -> list[list[int]]:
    """The series indexes of each legend line, filled left to right."""
    rows: list[list[int]] = [[]]
    used = 0.0
    for index, name in enumerate(names):
        entry = LEGEND_SWATCH + CHAR_WIDTH * len(name) + 16
        if rows[-1] and used + entry > width:
            rows.append([])
            used = 0.0
        rows[-1].append(index)
        used += entry
    return rows


@dataclass(frozen=True)
class Layout:
    area: Area
    x: Scale
    y: Scale
    x_ticks: tuple[float, ...]
    y_ticks: tuple[float, ...]
    x_step: float
    y_step: float
    legend: tuple[tuple[int, ...], ...]


def layout(plot: LinePlot, width: int = WIDTH, height: int = HEIGHT) -> Layout:
    """Where everything goes: the legend's lines, the plot area under them,
    and the scales of both axes."""
    names = [s.name for s in plot.series]
    rows = legend_rows(names, width - MARGIN_LEFT - MARGIN_RIGHT)
    top = LEGEND_TOP + LEGEND_LINE * len(rows) + 10
    area = Area(MARGIN_LEFT, top, width - MARGIN_LEFT - MARGIN_RIGHT,
                max(40.0, height - top - MARGIN_BOTTOM))
    xs = [x for s in plot.series for x, _ in s.points]
    ys = [y for s in plot.series for _, y in s.points]
    x_low, x_high, x_step = axis_range(xs, include_zero=False, integer=plot.integer_x)
    y_low, y_high, y_step = axis_range(ys, include_zero=True, integer=False)
    return Layout(
        area=area,
        x=Scale(x_low, x_high, area.left, area.right),
        # Pixels grow downwards: the lowest value sits at the bottom.
        y=Scale(y_low, y_high, area.bottom, area.top),
        x_ticks=tuple(ticks(x_low, x_high, x_step)),
        y_ticks=tuple(ticks(y_low, y_high, y_step)),
        x_step=x_step,
        y_step=y_step,
        legend=tuple(tuple(row) for row in rows),
    )


def plot_points(series: Series, frame: Layout) -> list[Point]:
    """The pixels of a series' points, in the order of x (the polyline's)."""
    return [(frame.x(x), frame.y(y)) for x, y in sorted(series.points, key=lambda p: p[0])]


def _number(value: float) -> str:
    """A data value in an attribute: exact for whole numbers."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _pixels(value: float) -> str:
    return f"{value:.2f}"


def _axes(plot: LinePlot, frame: Layout) -> list[str]:
    area = frame.area
    out = [
        f'<line class="axis x-axis" x1="{_pixels(area.left)}" y1="{_pixels(area.bottom)}" '
        f'x2="{_pixels(area.right)}" y2="{_pixels(area.bottom)}" stroke="#333"/>',
        f'<line class="axis y-axis" x1="{_pixels(area.left)}" y1="{_pixels(area.top)}" '
        f'x2="{_pixels(area.left)}" y2="{_pixels(area.bottom)}" stroke="#333"/>',
    ]
    for value in frame.y_ticks:
        y = _pixels(frame.y(value))
        out.append(f'<line class="grid" x1="{_pixels(area.left)}" y1="{y}" '
                   f'x2="{_pixels(area.right)}" y2="{y}" stroke="#e3e3e3"/>')
        out.append(f'<text class="tick y-tick" x="{_pixels(area.left - 6)}" y="{y}" '
                   f'text-anchor="end" dominant-baseline="middle">'
                   f'{escape(tick_label(value, frame.y_step))}</text>')
    for value in frame.x_ticks:
        x = _pixels(frame.x(value))
        out.append(f'<line class="tick-mark" x1="{x}" y1="{_pixels(area.bottom)}" '
                   f'x2="{x}" y2="{_pixels(area.bottom + 5)}" stroke="#333"/>')
        out.append(f'<text class="tick x-tick" x="{x}" y="{_pixels(area.bottom + 18)}" '
                   f'text-anchor="middle">{escape(tick_label(value, frame.x_step))}</text>')
    out.append(f'<text class="axis-label x-label" x="{_pixels(area.left + area.width / 2)}" '
               f'y="{_pixels(area.bottom + 40)}" text-anchor="middle">'
               f'{escape(plot.x_label)}</text>')
    middle = area.top + area.height / 2
    out.append(f'<text class="axis-label y-label" x="16" y="{_pixels(middle)}" '
               f'text-anchor="middle" transform="rotate(-90 16 {_pixels(middle)})">'
               f'{escape(plot.y_label)}</text>')
    return out


def _legend(plot: LinePlot, frame: Layout) -> list[str]:
    out = ['<g class="legend">']
    for line, row in enumerate(frame.legend):
        x = frame.area.left
        y = LEGEND_TOP + LEGEND_LINE * line + LEGEND_LINE / 2
        for index in row:
            series = plot.series[index]
            colour = PALETTE[index % len(PALETTE)]
            dash = ' stroke-dasharray="6 4"' if series.dashed else ""
            out.append(
                f'<g class="legend-entry" data-series="{escape(series.name)}">'
                f'<line x1="{_pixels(x)}" y1="{_pixels(y)}" x2="{_pixels(x + 20)}" '
                f'y2="{_pixels(y)}" stroke="{colour}" stroke-width="2.5"{dash}/>'
                f'<text x="{_pixels(x + LEGEND_SWATCH)}" y="{_pixels(y)}" '
                f'dominant-baseline="middle">{escape(series.name)}</text></g>')
            x += LEGEND_SWATCH + CHAR_WIDTH * len(series.name) + 16
    out.append("</g>")
    return out


def _series(plot: LinePlot, frame: Layout) -> list[str]:
    out = []
    for index, series in enumerate(plot.series):
        colour = PALETTE[index % len(PALETTE)]
        name = escape(series.name)
        dash = ' stroke-dasharray="6 4"' if series.dashed else ""
        ordered = sorted(series.points, key=lambda p: p[0])
        pixels = plot_points(series, frame)
        out.append(f'<g class="series" data-series="{name}">')
        out.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="'
            + " ".join(f"{_pixels(x)},{_pixels(y)}" for x, y in pixels) + '"/>')
        for (x, y), (px, py) in zip(ordered, pixels, strict=True):
            out.append(
                f'<circle class="point" cx="{_pixels(px)}" cy="{_pixels(py)}" r="3.5" '
                f'fill="{colour}" data-series="{name}" data-x="{_number(x)}" '
                f'data-y="{_number(y)}"><title>{name}: {escape(tick_label(x, 1))} → '
                f'{escape(f"{y:,.6g}" if not float(y).is_integer() else f"{int(y):,}")}'
                f"</title></circle>")
        out.append("</g>")
    return out


def render_svg(plot: LinePlot, plot_id: str, width: int = WIDTH, height: int = HEIGHT) -> str:
    """The plot as one ``<svg>`` element, for inline use in an HTML page
    (which needs no namespace declaration: the page holds no URL at all)."""
    frame = layout(plot, width, height)
    parts = [
        f'<svg class="plot" id="{escape(plot_id)}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{escape(plot_id)}-title" font-family="sans-serif" font-size="12">',
        f'<title id="{escape(plot_id)}-title">{escape(plot.title)}</title>',
        *_axes(plot, frame),
        *_series(plot, frame),
        *_legend(plot, frame),
        "</svg>",
    ]
    return "\n".join(parts)
