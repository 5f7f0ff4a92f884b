"""Cold turns in the report's totals (``offline/report``): the requests the
proxy's ledger billed as cold (back after the cache's lifetime) are counted,
and what masking saved on them is given apart from the saving on warm ones,
from what each flow recorded; a request whose bill cannot be read counts in
neither."""

from __future__ import annotations

from obsmask_core.offline.report.request_numbers import RequestNumbers
from obsmask_core.offline.report.totals_section import totals, totals_table
from obsmask_core.totals.cold import TurnFacts


def numbers(number: int, turn: TurnFacts | None) -> RequestNumbers:
    return RequestNumbers(
        number=number, flow_number=number, action="masked", reason="", tokens_without=1_000,
        tokens_with=800, provider=None, frontier_turn=1, tool_turns=3, stage="masking",
        masked=1, clipped=0, masked_tokens_saved=150, replayed=None, turn=turn)


def test_the_totals_give_the_saving_on_cold_turns_apart_from_warm_ones():
    requests = [numbers(1, TurnFacts(False, 1000.0, 1200.0)),
                numbers(2, TurnFacts(True, 3000.0, 7000.5)),
                numbers(3, TurnFacts(False, 950.0, 900.0)),
                numbers(4, None)]
    figures = totals(flows=4, conversations=1, requests=requests, cuts=[])
    assert (figures.cold_requests, figures.cold_saved, figures.warm_saved) == (1, 4000, 150)
    rows = {row[0]: row[1] for row in totals_table(figures).rows}
    assert (rows["Cold turns"], rows["Estimated saving on cold turns"],
            rows["Estimated saving on warm turns"]) == (1, 4000, 150)


def test_a_run_without_a_cold_turn_says_none():
    figures = totals(flows=1, conversations=1, cuts=[],
                     requests=[numbers(1, TurnFacts(False, 10.0, 12.0))])
    assert (figures.cold_requests, figures.cold_saved, figures.warm_saved) == (0, 0, 2)
