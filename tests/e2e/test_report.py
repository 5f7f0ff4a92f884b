"""End to end: scripts/report.py's page, opened in a real headless Chromium.

The report is run as a command (the main virtual environment's python) on
the saved flow files of fixtures/flows/ (recorded without obsmask), and on a
session of each format recorded through a real mitmdump with obsmask
masking on: the fixture's flows, their answers given a usage report in the
format's own shape and an MCP answer with a long string added, replayed
offline through the addon (``mitmdump -nr IN -s addons/obsmask.py --set
obsmask_window_turns=2 -w OUT``), which writes the masked flows with their
backups and metadata.

The page the browser renders is then read back: each plot's SVG with its
points, the numbers of its tables against the numbers the flows carry
(computed here from the flows directly), nothing fetched from anywhere; and
a screenshot is saved.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from obsmask_core.conversation.planning.holdout import conversation_id
from obsmask_core.conversation.turns.wire_formats import FORMATS
from support.browser import rendered_dom, screenshot
from support.flow_files import post_flow, read_flows, write_flows
from support.mcp_flows import mcp_flow, response_message
from support.processes import REPO, MitmdumpProcess

pytestmark = pytest.mark.e2e

FLOWS = REPO / "fixtures" / "flows"
REPORT = REPO / "scripts" / "report.py"
MEASURE = REPO / "scripts" / "measure.py"
FORMAT_NAMES = ("chat", "anthropic", "responses")
WINDOW_TURNS = 2
PRICE_MODELS = ("anthropic", "openai", "openai_50", "none")
LONG_MCP_TEXT = "HEAD" + "x" * 12_000 + "TAIL"


# The flows ---------------------------------------------------------------------




def usage_report(fmt_name: str, number: int) -> dict[str, object]:
    """A usage report of request ``number`` (from 1) in the format's own shape:
    from the second request on, part of the prompt is read from the cache."""
    cached = 1_024 * (number - 1)
    if fmt_name == "anthropic":
        return {"input_tokens": 40 + number, "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": 700 * number, "output_tokens": 20}
    if fmt_name == "responses":
        return {"input_tokens": 2_500 * number, "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": 20, "total_tokens": 2_500 * number + 20}
    return {"prompt_tokens": 2_500 * number, "completion_tokens": 20,
            "total_tokens": 2_500 * number + 20,
            "prompt_tokens_details": {"cached_tokens": cached}}


def with_usage_and_mcp(fmt_name: str, path: Path) -> Path:
    """The fixture's flows, each answer to a POST reporting usage, and a
    tools/call answered with a string long enough to be cut."""
    flows = read_flows(FLOWS / f"{fmt_name}_session.mitm")
    number = 0
    for flow in flows:
        if flow.request.method == "POST":
            number += 1
            flow.response.content = json.dumps({"id": f"answer-{number}",
                                                "usage": usage_report(fmt_name, number)}).encode()
    flows.append(mcp_flow(response_message(LONG_MCP_TEXT)))
    return write_flows(path, flows)


def record_through_obsmask(fmt_name: str, workdir: Path) -> Path:
    """The session replayed through a real mitmdump with obsmask (no
    mitm.toml in its directory: the built-in settings and the window of
    --set), written with the masked flows. The report, in a folder without
    mitm.toml, reads the recommended settings; the policy the flows record
    (the window, min_chars, payback_factor, the price model and the
    allowance) goes over them, so its replay is what the proxy did."""
    source = with_usage_and_mcp(fmt_name, workdir / "unmasked.mitm")
    out = workdir / f"{fmt_name}_recorded.mitm"
    proxy = MitmdumpProcess(["-n", "-r", str(source), "-w", str(out), "--set",
                             f"obsmask_window_turns={WINDOW_TURNS}"], workdir, workdir)
    try:
        assert proxy.wait_for_exit() == 0, proxy.output()
    finally:
        proxy.stop()
    return out


def run_report(flows: list[Path], workdir: Path, *options: str) -> Path:
    page = workdir / "report.html"
    result = subprocess.run(
        [sys.executable, str(REPORT), *(str(f) for f in flows), "-o", str(page), *options],
        cwd=workdir, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"wrote {page}" in result.stderr
    return page


# What the flows say, computed here ------------------------------------------------------


@dataclass
class Expected:
    """A session's figures, from its flows alone."""

    anchor: str  # the conversation's section id
    requests: int = 0  # POSTs on the session's route
    rows: list[dict[str, object]] = field(default_factory=list)  # masking, per conversation request
    totals: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    mcp: list[dict[str, object]] = field(default_factory=list)


def expected_figures(fmt_name: str, path: Path) -> Expected:
    fmt = FORMATS[fmt_name]
    posts = [flow for flow in read_flows(path) if flow.request.method == "POST"
             and "obsmask_mcp" not in flow.metadata]
    first = json.loads(posts[0].request.content if not posts[0].modified()
                       else posts[0].get_state()["backup"]["request"]["content"])
    expected = Expected(f"{conversation_id(first[fmt.list_member])}-{fmt_name}", len(posts))
    totals = expected.totals
    for flow in posts:
        meta = flow.metadata.get("obsmask", {})
        action = meta.get("action")
        totals[action or "none"] += 1
        if action == "masked":
            totals["masked_tool_results"] += meta["masked_tool_results"]
            totals["tokens_saved"] += meta["masked_tokens_before"] - meta["masked_tokens_after"]
        usage = meta.get("provider_usage")
        if usage:
            totals["provider_reports"] += 1
            totals["provider_input"] += usage.get("input_tokens", 0)
            totals["provider_cached"] += usage.get("cached_input_tokens", 0)
            totals["provider_cache_creation"] += usage.get("cache_creation_input_tokens", 0)
        if meta.get("conversation"):
            expected.rows.append(meta)
    for flow in read_flows(path):
        cut = flow.metadata.get("obsmask_mcp", {})
        if cut.get("action") == "truncated":
            expected.mcp.append(cut)
    return expected


# The rendered page -----------------------------------------------------------------


@dataclass
class Plot:
    points: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    pixels: list[tuple[float, float]] = field(default_factory=list)
    polylines: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    legend: list[str] = field(default_factory=list)
    x_axis: tuple[float, float] = (0.0, 0.0)
    y_axis: tuple[float, float] = (0.0, 0.0)


@dataclass
class Grid:
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    footer: list[str] = field(default_factory=list)

    def column(self, name: str) -> list[str]:
        index = self.columns.index(name)
        return [row[index] for row in self.rows]


class RenderedPage(HTMLParser):
    """The plots, tables and outside references of a rendered DOM."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.plots: dict[str, Plot] = {}
        self.tables: dict[str, Grid] = {}
        self.references: list[str] = []  # every src/href value
        self.tags: set[str] = set()
        self._plot: Plot | None = None
        self._table: Grid | None = None
        self._part = ""
        self._text_class: str | None = None
        self._cell: str | None = None
        self._header: str | None = None
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        self.references += [value for name, value in attrs
                            if name in ("src", "href", "xlink:href", "srcset") and value]
        if tag == "svg":
            self._plot = self.plots.setdefault(a["id"], Plot())
        elif tag == "circle" and self._plot is not None:
            self._plot.points[a["data-series"]].append((float(a["data-x"]), float(a["data-y"])))
            self._plot.pixels.append((float(a["cx"]), float(a["cy"])))
        elif tag == "polyline" and self._plot is not None:
            self._plot.polylines += 1
        elif tag == "line" and self._plot is not None and "axis" in (a.get("class") or ""):
            if "x-axis" in a["class"]:
                self._plot.x_axis = (float(a["x1"]), float(a["x2"]))
            else:
                self._plot.y_axis = (float(a["y1"]), float(a["y2"]))
        elif tag == "g" and self._plot is not None and a.get("class") == "legend-entry":
            self._plot.legend.append(a["data-series"])
        elif tag == "text" and self._plot is not None:
            self._text_class = a.get("class")
        elif tag == "table":
            self._table = self.tables.setdefault(a["id"], Grid())
        elif tag in ("thead", "tbody", "tfoot"):
            self._part = tag
        elif tag == "tr" and self._table is not None and self._part == "tbody":
            self._table.rows.append([])
        elif tag == "td":
            self._cell = a.get("data-value", "")
        elif tag == "th" and self._part == "thead":
            self._header = ""

    def handle_endtag(self, tag):
        if tag == "svg":
            self._plot = None
        elif tag == "text":
            self._text_class = None
        elif tag == "table":
            self._table = None
        elif tag == "th" and self._header is not None and self._table is not None:
            self._table.columns.append(self._header)
            self._header = None
        elif tag == "td" and self._cell is not None and self._table is not None:
            target = self._table.footer if self._part == "tfoot" else self._table.rows[-1]
            target.append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._header is not None:
            self._header += data
        if self._plot is not None and self._text_class and "axis-label" in self._text_class:
            self._plot.labels[self._text_class.split()[-1]] = data


def open_in_browser(page: Path, workdir: Path) -> RenderedPage:
    html_text = page.read_text(encoding="utf-8")
    # Nothing in the page can make the browser fetch anything.
    assert "http://" not in html_text and "https://" not in html_text
    rendered = RenderedPage(rendered_dom(page.as_uri(), workdir))
    assert rendered.plots, "the browser rendered no plot"
    assert [ref for ref in rendered.references if not ref.startswith("#")] == []
    assert not rendered.tags & {"script", "link", "img", "iframe", "object", "embed"}
    for plot_id, plot in rendered.plots.items():
        assert plot.labels.get("x-label") and plot.labels.get("y-label"), plot_id
        assert plot.legend, plot_id
        assert plot.polylines == len(plot.legend), plot_id
        (left, right), (top, bottom) = plot.x_axis, plot.y_axis
        for x, y in plot.pixels:
            assert left - 0.01 <= x <= right + 0.01 and top - 0.01 <= y <= bottom + 0.01, plot_id
    return rendered


def numbers(values: list[str]) -> list[float]:
    return [float(value) for value in values]


def totals_of(page: RenderedPage) -> dict[str, int]:
    return {row[0]: int(row[1]) for row in page.tables["table-totals"].rows}


def check_bills(page: RenderedPage, anchor: str, tokens: Grid, *, replay_is_sent: bool) -> None:
    """Every price model's plot and table. Under "none" a request costs its
    input tokens: the bill so far without masking adds up those the client
    sent, the bill with masking those of the replayed requests, which are
    the requests that went out when the replay follows what obsmask did."""
    for model in PRICE_MODELS:
        plot = page.plots[f"plot-{anchor}-bill-{model}"]
        table = page.tables[f"table-{anchor}-bill-{model}"]
        for series, column in (("without masking", "Without masking"),
                               ("with masking", "With masking")):
            assert plot.points[series] == list(zip(
                numbers(table.column("Request")), numbers(table.column(column)), strict=True))
    none = page.tables[f"table-{anchor}-bill-none"]
    for bill_column, tokens_column in (("Without masking", "Without masking"),
                                       ("With masking", "Replayed with masking")):
        sent = numbers(tokens.column(tokens_column))
        assert numbers(none.column(bill_column)) == [sum(sent[: n + 1]) for n in range(len(sent))]
    assert (tokens.column("With masking") == tokens.column("Replayed with masking")) == (
        replay_is_sent)


# The tests ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt_name", FORMAT_NAMES)
def test_the_page_of_a_session_recorded_without_obsmask_shows_what_masking_would_do(
        tmp_path, fmt_name):
    """A fixture recorded without obsmask: no request has obsmask's record;
    the replay under the built-in settings (the spec profile of the
    recommended ones, which apply in a folder without mitm.toml) draws the
    tokens, the frontier and the bills, and the page says it is a replay."""
    fixture = FLOWS / f"{fmt_name}_session.mitm"
    expected = expected_figures(fmt_name, fixture)
    page_path = run_report([fixture], tmp_path, "--set", "obsmask_profile=spec")
    page = open_in_browser(page_path, tmp_path)
    anchor = expected.anchor

    totals = totals_of(page)
    assert totals["Requests seen"] == expected.requests == 4
    assert totals["No obsmask record"] == 4 and totals["Masked"] == 0
    assert totals["Provider usage reports"] == 0 and totals["MCP strings cut"] == 0

    tokens = page.tables[f"table-{anchor}-tokens"]
    assert tokens.column("Request") == ["1", "2", "3"]
    assert tokens.column("obsmask") == ["no record"] * 3
    # Recorded without obsmask: what went out is what the client sent.
    assert tokens.column("With masking") == tokens.column("Without masking")
    plot = page.plots[f"plot-{anchor}-tokens"]
    assert plot.points["without masking (as the client sent it)"] == list(zip(
        [1.0, 2.0, 3.0], numbers(tokens.column("Without masking")), strict=True))
    assert f"plot-{anchor}-cache" not in page.plots

    # The replay masks (the built-in window of 8 tool turns; 19 in the last
    # request), drawn dashed beside what went out.
    replayed = numbers(tokens.column("Replayed with masking"))
    assert replayed[-1] < numbers(tokens.column("Without masking"))[-1]
    assert plot.points["with masking, replayed under the policy"] == list(zip(
        [1.0, 2.0, 3.0], replayed, strict=True))
    frontier = page.plots[f"plot-{anchor}-frontier"]
    assert "frontier, as obsmask recorded it" not in frontier.points
    assert len(frontier.points["frontier, replayed under the policy"]) == 3
    check_bills(page, anchor, tokens, replay_is_sent=False)
    # The unreadable body has no conversation and nothing to draw.
    assert page.tables["table-other-tokens"].column("Flow") == ["5"]
    assert "plot-other-tokens" not in page.plots
    screenshot(page_path.as_uri(), tmp_path / f"report-{fmt_name}-fixture.png")


@pytest.mark.parametrize("fmt_name", FORMAT_NAMES)
def test_the_page_of_a_session_masked_by_obsmask_shows_the_flows_figures(tmp_path, fmt_name):
    recorded = record_through_obsmask(fmt_name, tmp_path)
    expected = expected_figures(fmt_name, recorded)
    assert len(expected.rows) == 3 and expected.totals["masked"] == 3, "obsmask masked nothing"
    page_path = run_report([recorded], tmp_path)
    page = open_in_browser(page_path, tmp_path)
    anchor = expected.anchor

    # The totals are the sums of the flows' metadata.
    totals = totals_of(page)
    want = expected.totals
    assert totals["Requests seen"] == expected.requests
    assert (totals["Masked"], totals["Left unchanged"], totals["Passed through"],
            totals["No obsmask record"]) == (want["masked"], want["unchanged"],
                                             want["passed_through"], want["none"])
    assert totals["Tool results masked"] == want["masked_tool_results"]
    assert totals["Tokens saved"] == want["tokens_saved"]
    assert totals["Provider usage reports"] == want["provider_reports"] == 4
    assert totals["Provider-reported input tokens"] == want["provider_input"]
    assert totals["Provider-reported cached input tokens"] == want["provider_cached"]
    assert totals["Provider-reported cache-creation tokens"] == want["provider_cache_creation"]
    assert totals["MCP answers cut"] == len(expected.mcp) == 1
    assert totals["MCP strings cut"] == sum(cut["strings_cut"] for cut in expected.mcp)
    assert totals["MCP tokens saved"] == sum(cut["tokens_saved"] for cut in expected.mcp)

    # The frontier's moves, request by request, as the flows recorded them;
    # replayed under the flows' own window, each request comes out as sent.
    frontier = page.tables[f"table-{anchor}-frontier"]
    assert frontier.column("Stage") == [meta["stage"] for meta in expected.rows]
    assert frontier.column("Frontier") == [str(meta["frontier_turn"]) for meta in expected.rows]
    assert frontier.column("Masked") == [str(m["masked_tool_results"]) for m in expected.rows]
    assert frontier.column("Clipped") == [str(m["clipped_tool_results"]) for m in expected.rows]
    assert frontier.column("Replayed = sent") == ["yes"] * 3
    assert frontier.column("Replayed: frontier") == frontier.column("Frontier")
    plot = page.plots[f"plot-{anchor}-frontier"]
    assert plot.points["frontier, as obsmask recorded it"] == [
        (float(n), float(meta["frontier_turn"])) for n, meta in enumerate(expected.rows, 1)]

    # The provider's usage, as reported, and its cached share.
    cache = page.tables[f"table-{anchor}-cache"]
    usages = [meta["provider_usage"] for meta in expected.rows]
    assert cache.column("Input tokens (as reported)") == [str(u["input_tokens"]) for u in usages]
    assert cache.column("Read from the cache") == [str(u["cached_input_tokens"]) for u in usages]
    prompts = [u["input_tokens"] + (u["cached_input_tokens"] + u["cache_creation_input_tokens"]
                                    if fmt_name == "anthropic" else 0) for u in usages]
    assert numbers(cache.column("Prompt tokens")) == prompts
    shares = [100 * u["cached_input_tokens"] / p for u, p in zip(usages, prompts, strict=True)]
    assert [y for _, y in page.plots[f"plot-{anchor}-cache"].points[
        "cached share (provider-reported)"]] == pytest.approx(shares)

    # Input tokens: masking sent fewer, and the plot draws the table.
    tokens = page.tables[f"table-{anchor}-tokens"]
    assert tokens.column("obsmask") == ["masked"] * 3
    assert all(w < wo for w, wo in zip(numbers(tokens.column("With masking")),
                                       numbers(tokens.column("Without masking")), strict=True))
    tokens_plot = page.plots[f"plot-{anchor}-tokens"]
    assert tokens_plot.points["with masking (as it went out)"] == list(zip(
        [1.0, 2.0, 3.0], numbers(tokens.column("With masking")), strict=True))
    assert "with masking, replayed under the policy" not in tokens_plot.points
    assert [y for _, y in tokens_plot.points["prompt tokens the provider reported"]] == prompts
    check_bills(page, anchor, tokens, replay_is_sent=True)

    # What obsmask saved leads the page: its plot comes first, and its numbers
    # are the flows'. Under their price model ("none", the built-in one they
    # recorded) a bill is the tokens of its requests: the estimate is the
    # tokens sent so far over those the client sent, the provider's line the
    # prompt tokens it reported so far over the latter put in its tokens (by
    # what it reported over the replay's count of the same requests sent).
    assert next(iter(page.plots)) == f"plot-saved-saved-{anchor}"
    saved = page.tables[f"table-saved-saved-{anchor}"]
    without = numbers(tokens.column("Without masking"))
    replayed = numbers(tokens.column("Replayed with masking"))

    def so_far(values):
        return [sum(values[: n + 1]) for n in range(len(values))]

    assert numbers(saved.column("Estimate")) == pytest.approx(
        [w / wo for w, wo in zip(so_far(replayed), so_far(without), strict=True)], abs=1e-4)
    # Without a cache, that is the tokens sent over the tokens without, both
    # in the replay's count: the provider's scale cancels out.
    sent = numbers(tokens.column("With masking"))
    assert numbers(saved.column("Provider's counts")) == pytest.approx(
        [s / wo for s, wo in zip(so_far(sent), so_far(without), strict=True)], abs=1e-4)
    assert page.plots[f"plot-saved-saved-{anchor}"].points["estimate (replay)"] == list(zip(
        [1.0, 2.0, 3.0], numbers(saved.column("Estimate")), strict=True))
    [line] = [text for text in re.findall(r'<p class="lead saved-line">(.*?)</p>',
                                          page_path.read_text(encoding="utf-8"))]
    final = sum(replayed) / sum(without)
    assert f"the bill is {final:.3f}× the bill without" in html.unescape(line)
    assert (f"own counts (3 request(s); tool definitions, system and messages on both sides; "
            f"{sum(prompts) / sum(sent):.2f} of its tokens to one of the replay's): "
            f"{sum(sent) / sum(without):.3f}×") in html.unescape(line)

    # The MCP cut, as its flow recorded it.
    mcp = page.tables["table-mcp-mcp"]
    cut = expected.mcp[0]
    assert mcp.rows[0][3:] == [str(cut["strings_cut"]), str(cut["chars_before"]),
                               str(cut["chars_after"]), str(cut["tokens_saved"])]
    assert page.plots["plot-mcp-mcp"].points["characters before the cut"] == [
        (1.0, float(cut["chars_before"]))]
    # The request obsmask passed through is in the group of no conversation.
    assert page.tables["table-other-tokens"].column("obsmask") == ["passed through"]
    screenshot(page_path.as_uri(), tmp_path / f"report-{fmt_name}-recorded.png",
               size=(1600, 2400))


def test_the_three_fixtures_together_are_three_conversations(tmp_path):
    page_path = run_report([FLOWS / f"{name}_session.mitm" for name in FORMAT_NAMES], tmp_path)
    page = open_in_browser(page_path, tmp_path)
    assert totals_of(page)["Conversations"] == 3
    assert totals_of(page)["Requests seen"] == 12
    assert len([plot_id for plot_id in page.plots if plot_id.endswith("-tokens")]) == 3


def lead_paragraphs(page: Path) -> list[str]:
    return [html.unescape(text) for text in
            re.findall(r'<p class="lead">(.*?)</p>', page.read_text(encoding="utf-8"))]


def section_titles(page: Path) -> list[str]:
    return [html.unescape(text) for text in
            re.findall(r"<h2>(.*?)</h2>", page.read_text(encoding="utf-8"))]


def test_a_figure_beyond_2_53_in_the_flows_is_read_as_absent_and_the_page_is_made(tmp_path):
    """A flow file is untrusted input: 10**400 in obsmask's record (the
    provider's usage, an MCP cut) is no number a float can hold."""
    flows = read_flows(FLOWS / "chat_session.mitm")
    for flow in flows:
        if flow.request.method == "POST":
            flow.metadata["obsmask"] = {"action": "unchanged", "format": "chat",
                                        "frontier_turn": 10**400, "provider_usage": {
                                            "input_tokens": 10**400, "cached_input_tokens": 5}}
    cut = mcp_flow(response_message("a short answer"))
    cut.metadata["obsmask_mcp"] = {"action": "truncated", "strings_cut": 1,
                                   "chars_before": 10**400, "chars_after": 5}
    path = write_flows(tmp_path / "huge.mitm", [*flows, cut])
    page = open_in_browser(run_report([path], tmp_path), tmp_path)
    totals = totals_of(page)
    assert totals["Provider-reported input tokens"] == 0
    assert totals["Provider-reported cached input tokens"] == 4 * 5
    assert totals["MCP characters before the cut"] == 0 and totals["MCP answers cut"] == 1


def test_a_masked_flow_without_its_original_is_skipped_and_the_page_says_so(tmp_path):
    """Its request is the masked body: drawn as the client's, it would show
    no saving. Skipped as measure.py skips it, counted and named."""
    fixture = read_flows(FLOWS / "chat_session.mitm")
    lost = post_flow("/v1/chat/completions", fixture[1].request.content or b"",
                     metadata={"action": "masked", "format": "chat", "masked_tool_results": 3})
    path = write_flows(tmp_path / "lost.mitm", [*fixture, lost])
    page_path = run_report([path], tmp_path)
    totals = totals_of(open_in_browser(page_path, tmp_path))
    assert totals["Masked requests skipped"] == 1
    assert totals["Requests seen"] == 4 and totals["Masked"] == 0
    assert totals["Tool results masked"] == 0
    [said] = [p for p in lead_paragraphs(page_path) if "obsmask masked skipped" in p]
    assert said.startswith("1 request(s) obsmask masked skipped, neither drawn nor billed: "
                           "their original (the flow's backup) is missing or cannot be read")
    assert said.endswith(f"lost.mitm #{len(fixture) + 1} /v1/chat/completions.")


def test_held_out_conversations_are_named_and_counted_at_the_top_of_the_page(tmp_path):
    """holdout_percent 70: of the three fixtures only the chat session's
    first user message falls in the lowest 70 buckets (66; 88 and 81 for
    the others). The replay leaves it unmasked, as the proxy would; the
    page names it, counts it, keeps its bill in the totals and gives the
    ratio of the two others beside."""
    page_path = run_report([FLOWS / f"{name}_session.mitm" for name in FORMAT_NAMES], tmp_path,
                           "--set", "obsmask_holdout_percent=70")
    page = open_in_browser(page_path, tmp_path)
    assert totals_of(page)["Conversations held out"] == 1
    titles = [title for title in section_titles(page_path) if title.startswith("Conversation")]
    assert [title.endswith(", held out") for title in titles] == [True, False, False]
    assert "(OpenAI Chat Completions)" in titles[0]
    [said] = [p for p in lead_paragraphs(page_path) if "held out" in p]
    assert said.startswith("1 of the 3 conversation(s) is held out (holdout_percent = 70): "
                           "obsmask leaves held-out conversations unmasked")
    bills = page.tables["table-bill-totals"]
    assert bills.columns[-1] == "Ratio, conversations not held out"
    chat = expected_figures("chat", FLOWS / "chat_session.mitm").anchor
    none = page.tables[f"table-{chat}-bill-none"]
    assert none.column("With masking") == none.column("Without masking")
    # The held-out bill is in the total; the other ratio leaves it out.
    ratios = dict(zip(bills.column("Price model"), numbers(bills.column("Ratio")), strict=True))
    others = dict(zip(bills.column("Price model"),
                      numbers(bills.column("Ratio, conversations not held out")), strict=True))
    assert others["none"] < ratios["none"] < 1


def test_a_file_that_is_not_flows_stops_the_report_with_a_message(tmp_path):
    bad = tmp_path / "notes.mitm"
    bad.write_text("not a flow file")
    result = subprocess.run([sys.executable, str(REPORT), str(bad), "-o",
                             str(tmp_path / "r.html")], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0
    assert "notes.mitm: not a mitmproxy flow file" in result.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("options", [
    ("--set", "obsmask_window_turn=2"),  # unknown, with the closest option
    ("--set", "obsmask_window_turns=two"),  # mitmproxy's own words
    ("--set", "obsmask_batch_turns=0"),  # the settings class's check
    ("--config", "missing.toml"),
])
def test_a_setting_the_proxy_would_refuse_stops_the_report_with_measures_line(
        tmp_path, options):
    """The settings are read by measure.py's reader: a refused one stops the
    report with measure.py's line (tested word for word with measure.py),
    report's name before it, and no page."""
    fixture, page = str(FLOWS / "chat_session.mitm"), tmp_path / "r.html"
    report = subprocess.run([sys.executable, str(REPORT), fixture, "-o", str(page), *options],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    measure = subprocess.run([sys.executable, str(MEASURE), fixture, *options],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert (report.returncode, report.stdout, measure.returncode) == (1, "", 2)
    assert re.fullmatch(r"measure: [^\n]+\n", measure.stderr), measure.stderr
    assert report.stderr == "report: " + measure.stderr.removeprefix("measure: ")
    assert not page.exists()
