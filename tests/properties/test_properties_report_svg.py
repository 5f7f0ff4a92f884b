"""Properties of the report's SVG plots (offline/report/svg.py), for
any numbers: every point lies inside the plot area, and the points follow
the order of the requests along x."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.offline.report.svg import LinePlot, Series, layout, plot_points, render_svg

values = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)
counts = st.integers(min_value=0, max_value=10**9)


@st.composite
def request_series(draw: st.DrawFn) -> tuple[Series, ...]:
    """One to four series over the same requests 1..n (some values missing,
    as a request without a provider report)."""
    requests = draw(st.integers(min_value=1, max_value=60))
    series = []
    for number in range(draw(st.integers(min_value=1, max_value=4))):
        ys = draw(st.lists(st.one_of(st.none(), counts), min_size=requests,
                           max_size=requests))
        series.append(Series(f"series {number}",
                             tuple((x, y) for x, y in enumerate(ys, start=1) if y is not None)))
    return tuple(series)


def tokens_plot(series: tuple[Series, ...], integer_x: bool = True) -> LinePlot:
    return LinePlot("Input tokens per request", "Request", "Input tokens", series,
                    integer_x=integer_x)


@given(request_series())
def test_every_point_of_a_request_plot_lies_inside_the_plot_area(series):
    frame = layout(tokens_plot(series))
    for one in series:
        for point in plot_points(one, frame):
            assert frame.area.holds(point), (point, frame.area)


@given(st.lists(st.lists(st.tuples(values, values), max_size=30), min_size=1, max_size=4))
def test_every_point_lies_inside_the_plot_area_whatever_the_numbers(raw):
    series = tuple(Series(f"s{n}", tuple(points)) for n, points in enumerate(raw))
    frame = layout(tokens_plot(series, integer_x=False))
    for one in series:
        for point in plot_points(one, frame):
            assert frame.area.holds(point), (point, frame.area)


@given(request_series())
def test_the_points_follow_the_order_of_the_requests_along_x(series):
    frame = layout(tokens_plot(series))
    for one in series:
        pixels = [x for x, _ in plot_points(one, frame)]
        assert all(a < b for a, b in pairwise(pixels)), pixels
        requests = [x for x, _ in one.points]
        assert requests == sorted(requests)


@given(request_series())
def test_the_drawn_circles_are_the_points_and_lie_inside_the_plot_area(series):
    figure = tokens_plot(series)
    frame = layout(figure)
    root = ET.fromstring(render_svg(figure, "plot"))
    circles = root.findall(".//circle")
    assert len(circles) == sum(len(one.points) for one in series)
    area = frame.area
    for circle in circles:
        x, y = float(circle.get("cx")), float(circle.get("cy"))
        # Written with two decimals: within half a hundredth of the area.
        assert area.left - 0.005 <= x <= area.right + 0.005
        assert area.top - 0.005 <= y <= area.bottom + 0.005
    for one in series:
        drawn = [(float(c.get("data-x")), float(c.get("data-y"))) for c in circles
                 if c.get("data-series") == one.name]
        assert drawn == sorted(one.points)
