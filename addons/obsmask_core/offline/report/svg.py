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

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from obsmask_core.offline.report.plot_axes import Scale, axis_range, tick_label

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


def legend_width(name: str) -> float:
    """The width of a series' entry in the legend: its line, its name, a gap."""
    return LEGEND_SWATCH + CHAR_WIDTH * len(name) + 16


def legend_rows(names: Sequence[str], width: float) -> list[list[int]]:
    """The series indexes of each legend line, filled left to right."""
    rows: list[list[int]] = [[]]
    used = 0.0
    for index, name in enumerate(names):
        entry = legend_width(name)
        if rows[-1] and used + entry > width:
            rows.append([])
            used = 0.0
        rows[-1].append(index)
        used += entry
    return rows


@dataclass(frozen=True)
class Layout:
    """Where a plot goes: its area, its axes, the series of each legend line."""

    area: Area
    x: Scale
    y: Scale
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
    return Layout(
        area=area,
        x=Scale(*axis_range(xs, include_zero=False, integer=plot.integer_x),
                area.left, area.right),
        # Pixels grow downwards: the lowest value sits at the bottom.
        y=Scale(*axis_range(ys, include_zero=True, integer=False), area.bottom, area.top),
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
    for value in frame.y.ticks:
        y = _pixels(frame.y(value))
        out.append(f'<line class="grid" x1="{_pixels(area.left)}" y1="{y}" '
                   f'x2="{_pixels(area.right)}" y2="{y}" stroke="#e3e3e3"/>')
        out.append(f'<text class="tick y-tick" x="{_pixels(area.left - 6)}" y="{y}" '
                   f'text-anchor="end" dominant-baseline="middle">'
                   f'{escape(tick_label(value, frame.y.step))}</text>')
    for value in frame.x.ticks:
        x = _pixels(frame.x(value))
        out.append(f'<line class="tick-mark" x1="{x}" y1="{_pixels(area.bottom)}" '
                   f'x2="{x}" y2="{_pixels(area.bottom + 5)}" stroke="#333"/>')
        out.append(f'<text class="tick x-tick" x="{x}" y="{_pixels(area.bottom + 18)}" '
                   f'text-anchor="middle">{escape(tick_label(value, frame.x.step))}</text>')
    out.append(f'<text class="axis-label x-label" x="{_pixels(area.left + area.width / 2)}" '
               f'y="{_pixels(area.bottom + 40)}" text-anchor="middle">'
               f'{escape(plot.x_label)}</text>')
    middle = area.top + area.height / 2
    out.append(f'<text class="axis-label y-label" x="16" y="{_pixels(middle)}" '
               f'text-anchor="middle" transform="rotate(-90 16 {_pixels(middle)})">'
               f'{escape(plot.y_label)}</text>')
    return out


def _line_style(index: int, series: Series) -> tuple[str, str]:
    """The colour of the ``index``-th series, and its dash attribute (none
    for a solid line)."""
    return PALETTE[index % len(PALETTE)], ' stroke-dasharray="6 4"' if series.dashed else ""


def _legend(plot: LinePlot, frame: Layout) -> list[str]:
    out = ['<g class="legend">']
    for line, row in enumerate(frame.legend):
        x = frame.area.left
        y = LEGEND_TOP + LEGEND_LINE * line + LEGEND_LINE / 2
        for index in row:
            series = plot.series[index]
            colour, dash = _line_style(index, series)
            out.append(
                f'<g class="legend-entry" data-series="{escape(series.name)}">'
                f'<line x1="{_pixels(x)}" y1="{_pixels(y)}" x2="{_pixels(x + 20)}" '
                f'y2="{_pixels(y)}" stroke="{colour}" stroke-width="2.5"{dash}/>'
                f'<text x="{_pixels(x + LEGEND_SWATCH)}" y="{_pixels(y)}" '
                f'dominant-baseline="middle">{escape(series.name)}</text></g>')
            x += legend_width(series.name)
    out.append("</g>")
    return out


def _series(plot: LinePlot, frame: Layout) -> list[str]:
    out = []
    for index, series in enumerate(plot.series):
        colour, dash = _line_style(index, series)
        name = escape(series.name)
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
