"""The report's SVG line plots (offline/report/svg.py, plot_axes.py): where the
points go, the axes, the legend, and what the SVG carries for a reader."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from obsmask_core.offline.report.plot_axes import axis_range, nice_step, tick_label
from obsmask_core.offline.report.svg import LinePlot, Series, layout, plot_points, render_svg


def plot(*series: Series, integer_x: bool = True) -> LinePlot:
    return LinePlot("Input tokens per request", "Request", "Input tokens", series,
                    integer_x=integer_x)


def test_points_are_placed_linearly_between_the_axis_bounds():
    """x from 1 to 3 spans the plot area's width; y from 0 to 100 its
    height, with 0 at the bottom."""
    series = Series("tokens", ((1, 0), (2, 50), (3, 100)))
    frame = layout(plot(series))
    area = frame.area
    assert (frame.x.low, frame.x.high) == (1, 3)
    assert (frame.y.low, frame.y.high) == (0, 100)
    assert plot_points(series, frame) == [
        (area.left, area.bottom),
        (area.left + area.width / 2, area.top + area.height / 2),
        (area.right, area.top),
    ]


def test_the_points_of_a_series_are_joined_in_the_order_of_x():
    series = Series("tokens", ((3, 30), (1, 10), (2, 20)))
    frame = layout(plot(series))
    xs = [x for x, _ in plot_points(series, frame)]
    assert xs == sorted(xs) and len(set(xs)) == 3


def test_the_y_axis_always_shows_zero():
    assert axis_range([5_000, 9_000], include_zero=True, integer=False)[0] == 0
    assert axis_range([-40, -10], include_zero=True, integer=False)[1] == 0


def test_axis_bounds_are_whole_steps_around_the_values():
    low, high, step = axis_range([0, 8_302], include_zero=True, integer=False)
    assert (low, high, step) == (0, 10_000, 2_000)
    low, high, step = axis_range([1, 38], include_zero=False, integer=True)
    assert (low, high, step) == (0, 40, 10)


def test_a_count_axis_never_has_ticks_between_whole_numbers():
    assert axis_range([1, 2], include_zero=False, integer=True)[2] == 1


def test_a_single_value_still_gets_an_interval():
    assert axis_range([3], include_zero=False, integer=True)[:2] == (2, 4)
    assert axis_range([0], include_zero=True, integer=False)[:2] == (0, 1)
    assert axis_range([], include_zero=True, integer=False)[:2] == (0, 1)


@pytest.mark.parametrize(("span", "step"), [(10, 2), (8_302, 2_000), (1, 0.2), (37, 10),
                                            (100, 20), (0.03, 0.01)])
def test_tick_steps_are_one_two_or_five_times_a_power_of_ten(span, step):
    assert nice_step(span, 5) == pytest.approx(step)


def test_tick_labels_have_thousands_separators_and_the_decimals_the_step_needs():
    assert tick_label(12_000, 2_000) == "12,000"
    assert tick_label(0.4, 0.2) == "0.4"
    assert tick_label(0.25, 0.05) == "0.25"


def svg_tree(text: str) -> ET.Element:
    return ET.fromstring(text)


def test_the_svg_carries_every_point_with_its_series_and_values():
    series = (Series("without masking", ((1, 2_010), (2, 4_757))),
              Series("with masking", ((1, 1_964), (2, 3_542)), dashed=True))
    figure = plot(*series)
    root = svg_tree(render_svg(figure, "plot-tokens"))
    assert root.get("id") == "plot-tokens"
    circles = root.findall(".//circle")
    assert [(c.get("data-series"), c.get("data-x"), c.get("data-y")) for c in circles] == [
        ("without masking", "1", "2010"), ("without masking", "2", "4757"),
        ("with masking", "1", "1964"), ("with masking", "2", "3542"),
    ]
    frame = layout(figure)
    polylines = root.findall(".//polyline")
    assert [p.get("points") for p in polylines] == [
        " ".join(f"{x:.2f},{y:.2f}" for x, y in plot_points(s, frame)) for s in series]
    assert polylines[1].get("stroke-dasharray") and not polylines[0].get("stroke-dasharray")


def test_the_svg_has_both_axis_labels_its_ticks_and_a_legend_entry_per_series():
    root = svg_tree(render_svg(plot(Series("a", ((1, 5),)), Series("b", ((1, 7),))), "p"))
    texts = {t.get("class"): t.text for t in root.iter("text") if t.get("class")}
    assert texts["axis-label x-label"] == "Request"
    assert texts["axis-label y-label"] == "Input tokens"
    assert [g.get("data-series") for g in root.iter("g")
            if g.get("class") == "legend-entry"] == ["a", "b"]
    assert any(t.get("class") == "tick y-tick" for t in root.iter("text"))
    assert root.find("title").text == "Input tokens per request"


def test_text_in_the_svg_is_escaped():
    root = svg_tree(render_svg(LinePlot("<b>&", "x <", "y >", (
        Series('say "hi" & <go>', ((1, 1),)),)), "p"))
    assert root.find("title").text == "<b>&"
    assert root.find(".//circle").get("data-series") == 'say "hi" & <go>'


def test_a_long_legend_wraps_and_pushes_the_plot_area_down():
    short = layout(plot(Series("a", ((1, 1),))))
    names = [f"a rather long series name number {n}" for n in range(6)]
    long = layout(plot(*(Series(name, ((1, 1),)) for name in names)))
    assert len(long.legend) > 1 and sorted(i for row in long.legend for i in row) == list(
        range(6))
    assert long.area.top > short.area.top
