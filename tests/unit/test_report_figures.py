"""The report's figures and totals (offline/report/figures.py,
totals_section.py), from numbers alone: what each plot draws and what its table
says."""

from __future__ import annotations

import dataclasses

import pytest

from obsmask_core.offline.report.bills import ConversationBill, ModelBill
from obsmask_core.offline.report.cut_answers import McpCut, mcp_cuts
from obsmask_core.offline.report.figures import (
    Fixed,
    bill_figure,
    cache_figure,
    frontier_figure,
    mcp_figure,
    token_figure,
)
from obsmask_core.offline.report.flow_file import RecordedMcpCut
from obsmask_core.offline.report.replayed_plans import ReplayedPlan
from obsmask_core.offline.report.request_numbers import NO_RECORD, ProviderFigures, RequestNumbers
from obsmask_core.offline.report.totals_section import bill_totals_table, totals, totals_table


def request(number: int, **changes: object) -> RequestNumbers:
    """A masked request: 1,000 tokens per request number sent, 200 fewer after masking."""
    numbers = RequestNumbers(
        number=number, flow_number=number + 1, action="masked", reason="",
        tokens_without=1_000 * number, tokens_with=1_000 * number - 200, provider=None,
        frontier_turn=number, tool_turns=number + 2, stage="masking", masked=number,
        clipped=0, masked_tokens_saved=150,
        replayed=ReplayedPlan(number, number + 2, "masking", number, 0,
                              input_tokens=1_000 * number - 200, as_sent=True))
    return dataclasses.replace(numbers, **changes)


def openai_usage(prompt: int, cached: int) -> ProviderFigures:
    return ProviderFigures(prompt, cached, None, cache_outside_input=False)


def series_points(figure, name):
    return next(s.points for s in figure.plot.series if s.name == name)


def test_the_token_plot_draws_each_request_with_and_without_masking():
    figure = token_figure([request(1), request(2), request(3)])
    assert series_points(figure, "without masking (as the client sent it)") == (
        (1, 1_000), (2, 2_000), (3, 3_000))
    assert series_points(figure, "with masking (as it went out)") == (
        (1, 800), (2, 1_800), (3, 2_800))
    assert figure.table.rows[1] == (2, 3, "masked", 2_000, 1_800, 200, 1_800, None)
    assert figure.table.footer == ("All", None, None, 6_000, 5_400, 600, 5_400, None)
    # The replay sends what went out: no line of its own.
    assert "with masking, replayed under the policy" not in [s.name for s in figure.plot.series]


def test_the_token_plot_draws_the_replayed_requests_where_they_differ_from_what_went_out():
    unmasked = [request(n, action=NO_RECORD, tokens_with=1_000 * n) for n in (1, 2)]
    figure = token_figure(unmasked)
    assert series_points(figure, "with masking, replayed under the policy") == (
        (1, 800), (2, 1_800))
    assert figure.table.rows[0][4:7] == (1_000, 0, 800)


def test_the_token_plot_draws_the_provider_prompt_only_when_one_was_reported():
    assert len(token_figure([request(1)]).plot.series) == 2
    assert "The provider reported no usage for these requests." in token_figure(
        [request(1)]).notes
    figure = token_figure([request(1, provider=openai_usage(900, 0)), request(2)])
    assert series_points(figure, "prompt tokens the provider reported") == ((1, 900),)


def test_a_request_whose_body_could_not_be_read_has_no_point_and_no_estimate():
    figure = token_figure([request(1), request(2, tokens_without=None, tokens_with=None,
                                               action="passed_through")])
    assert series_points(figure, "without masking (as the client sent it)") == ((1, 1_000),)
    assert figure.table.rows[1][2:6] == ("passed through", None, None, None)
    assert figure.table.footer[3:6] == (1_000, 800, 200)
    nothing = token_figure([request(1, tokens_without=None, tokens_with=None, replayed=None)])
    assert nothing.table.footer == ("All", None, None, None, None, None, None, None)
    assert not nothing.plot.has_points


def test_anthropic_prompt_tokens_add_the_cached_and_written_ones_to_the_input():
    anthropic = ProviderFigures(10, 3_000, 500, cache_outside_input=True)
    openai = openai_usage(3_510, 3_000)
    assert anthropic.prompt_tokens == openai.prompt_tokens == 3_510
    assert anthropic.cached_percent == pytest.approx(100 * 3_000 / 3_510)


def test_the_cache_plot_draws_the_cached_share_of_each_reported_prompt():
    figure = cache_figure([request(1, provider=openai_usage(2_000, 0)), request(2),
                           request(3, provider=openai_usage(4_000, 3_072))])
    assert series_points(figure, "cached share (provider-reported)") == ((1, 0.0), (3, 76.8))
    assert figure.table.rows == ((1, 2_000, 0, None, 2_000, Fixed(0.0, 1)),
                                 (3, 4_000, 3_072, None, 4_000, Fixed(76.8, 1)))


def test_there_is_no_cache_plot_without_a_provider_report():
    assert cache_figure([request(1), request(2)]) is None


def test_the_frontier_plot_draws_the_recorded_and_the_replayed_frontier():
    moved = request(2, replayed=ReplayedPlan(1, 4, "masking", 1, 0, input_tokens=1_900,
                                             as_sent=False))
    figure = frontier_figure([request(1), moved])
    assert series_points(figure, "frontier, as obsmask recorded it") == ((1, 1), (2, 2))
    assert series_points(figure, "frontier, replayed under the policy") == ((1, 1), (2, 1))
    assert series_points(figure, "tool turns in the request") == ((1, 3), (2, 4))
    assert figure.table.rows[1] == (2, "masking", 2, 2, 0, "masking", 1, 1, 0, 4, "no")


def test_without_a_record_the_frontier_plot_says_the_line_is_replayed():
    unrecorded = [request(n, action=NO_RECORD, frontier_turn=None, tool_turns=None, stage=None,
                          masked=None, clipped=None) for n in (1, 2)]
    figure = frontier_figure(unrecorded)
    assert [s.name for s in figure.plot.series] == ["tool turns in the request",
                                                    "frontier, replayed under the policy"]
    assert series_points(figure, "tool turns in the request") == ((1, 3), (2, 4))
    assert any("recorded no frontier" in note for note in figure.notes)


def test_the_bill_plot_draws_both_bills_so_far_and_their_ratio():
    bill = ModelBill("anthropic", "Anthropic prices", (100.0, 250.0), (100.0, 200.0))
    figure = bill_figure(bill, (1, 3))
    assert series_points(figure, "without masking") == ((1, 100.0), (3, 250.0))
    assert series_points(figure, "with masking") == ((1, 100.0), (3, 200.0))
    assert figure.table.rows == ((1, Fixed(100.0, 1), Fixed(100.0, 1), Fixed(1.0, 3)),
                                 (3, Fixed(250.0, 1), Fixed(200.0, 1), Fixed(0.8, 3)))
    assert "anthropic" in figure.plot.title


def test_the_mcp_plot_draws_each_cut_answer_and_its_table_adds_them_up():
    cuts = [McpCut(1, 7, "/mcp", 2, 9_000, 4_000, 1_200), McpCut(2, 9, "/mcp", 1, 5_000,
                                                                4_100, None)]
    figure = mcp_figure(cuts)
    assert series_points(figure, "characters before the cut") == ((1, 9_000), (2, 5_000))
    assert series_points(figure, "characters after the cut") == ((1, 4_000), (2, 4_100))
    assert figure.table.footer == ("All", None, None, 3, 14_000, 8_100, 1_200)
    assert any("1 answer(s)" in note for note in figure.notes)


def test_the_totals_count_each_action_and_add_up_what_was_recorded():
    requests = [
        request(1, provider=openai_usage(2_000, 1_024)),
        request(2, action="unchanged", masked=None, masked_tokens_saved=None,
                provider=ProviderFigures(10, 2_000, 300, cache_outside_input=True)),
        request(3, action="passed_through", tokens_without=None, tokens_with=None,
                masked=None, masked_tokens_saved=None),
        request(4, action=NO_RECORD, masked=None, masked_tokens_saved=None),
    ]
    cuts = [McpCut(1, 9, "/mcp", 2, 9_000, 4_000, 1_200)]
    figures = totals(flows=12, conversations=1, requests=requests, cuts=cuts)
    assert (figures.requests, figures.masked, figures.unchanged, figures.passed_through,
            figures.no_record) == (4, 1, 1, 1, 1)
    assert figures.masked_tool_results == 1 and figures.tokens_saved == 150
    assert (figures.tokens_without, figures.tokens_with) == (7_000, 6_400)
    assert (figures.provider_reports, figures.provider_input, figures.provider_cached,
            figures.provider_cache_creation, figures.provider_prompt) == (
        2, 2_010, 3_024, 300, 4_310)
    assert (figures.mcp_answers_cut, figures.mcp_strings_cut, figures.mcp_tokens_saved) == (
        1, 2, 1_200)
    rows = {row[0]: row[1] for row in totals_table(figures).rows}
    assert rows["Requests seen"] == 4 and rows["MCP strings cut"] == 2


def test_the_bill_totals_add_every_conversation_final_bill_per_price_model():
    first = ConversationBill((1, 2), (ModelBill("none", "", (10.0, 30.0), (10.0, 20.0)),), ())
    second = ConversationBill((1,), (ModelBill("none", "", (70.0,), (60.0,)),), ())
    table = bill_totals_table([first, second])
    assert table.rows == (("none", Fixed(100.0, 1), Fixed(80.0, 1), Fixed(0.8, 3)),)
    assert bill_totals_table([]) is None


def test_a_cut_figure_beyond_2_53_or_not_a_count_is_read_as_absent():
    [cut] = mcp_cuts([RecordedMcpCut(4, "flows.mitm", "/mcp", {
        "strings_cut": 2**53 + 1, "chars_before": 10**400, "chars_after": -5,
        "tokens_saved": True})])
    assert cut == McpCut(1, 4, "/mcp", 0, 0, 0, None)
    mcp_figure([cut])  # draws: no number a float cannot hold


def test_the_totals_count_the_held_out_conversations_and_the_masked_requests_skipped():
    figures = totals(flows=3, conversations=2, requests=[request(1)], cuts=[], held_out=1,
                     lost_originals=2)
    rows = {row[0]: row[1] for row in totals_table(figures).rows}
    assert rows["Conversations held out"] == 1 and rows["Masked requests skipped"] == 2


def test_the_bill_totals_give_the_ratio_of_the_conversations_not_held_out_beside_the_whole():
    masked = ConversationBill((1, 2), (ModelBill("none", "", (10.0, 30.0), (10.0, 20.0)),), ())
    held = ConversationBill((1,), (ModelBill("none", "", (70.0,), (70.0,)),), (), held_out=True)
    table = bill_totals_table([masked, held])
    assert table.columns[-1] == "Ratio, conversations not held out"
    assert table.rows == (("none", Fixed(100.0, 1), Fixed(90.0, 1), Fixed(0.9, 3),
                           Fixed(20.0 / 30.0, 3)),)
    every = bill_totals_table([held])
    assert every.rows == (("none", Fixed(70.0, 1), Fixed(70.0, 1), Fixed(1.0, 3), None),)
    assert len(bill_totals_table([masked]).columns) == 4  # none held out: no column
