"""The figures of the page, from numbers alone: each is a line plot and the
table of the same numbers beside it (so they can be read, copied and
tested), with a few sentences where the numbers need them.

- input tokens per request, with and without masking, and the prompt the
  provider counted;
- the share of each prompt the provider read from its cache;
- the frontier's moves: as obsmask recorded them, and as the replayed policy
  places it;
- the bill so far under one price model, with and without masking;
- the MCP answers cut.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from obsmask_core.offline.report.bills import ModelBill
from obsmask_core.offline.report.cut_answers import McpCut
from obsmask_core.offline.report.request_numbers import NO_RECORD, RequestNumbers
from obsmask_core.offline.report.svg import LinePlot, Point, Series


@dataclass(frozen=True)
class Fixed:
    """A number shown with a fixed count of decimals (``data-value`` keeps it whole)."""

    value: float
    places: int


Cell = str | int | Fixed | None


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    footer: tuple[Cell, ...] | None = None  # a totals row


@dataclass(frozen=True)
class Figure:
    key: str  # unique within its section: the ids of the plot and the table
    plot: LinePlot
    table: Table
    notes: tuple[str, ...] = ()


REQUEST_AXIS = "Request (in the conversation's order)"
ACTION_WORDS: Mapping[str, str] = MappingProxyType({
    "masked": "masked", "unchanged": "nothing to mask", "passed_through": "passed through",
    NO_RECORD: "no record"})


def _points(pairs: Sequence[tuple[int, int | float | None]]) -> tuple[Point, ...]:
    """The (x, y) pairs whose y is known."""
    return tuple((float(x), float(y)) for x, y in pairs if y is not None)


def _fixed(value: float | None, places: int) -> Fixed | None:
    return Fixed(value, places) if value is not None else None


def _difference(a: int | None, b: int | None) -> int | None:
    return a - b if a is not None and b is not None else None


def _sum_known(values: Sequence[int | None]) -> int | None:
    """The sum of the known values; None when none is known."""
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def token_figure(requests: Sequence[RequestNumbers]) -> Figure:
    """Input tokens per request: as the client sent it, as it went out, as
    the replayed policy would send it, and the prompt the provider counted."""
    replayed = [(r.number, r.replayed.input_tokens if r.replayed else None) for r in requests]
    provider = [(r.number, r.provider.prompt_tokens if r.provider else None) for r in requests]
    series = [
        Series("without masking (as the client sent it)",
               _points([(r.number, r.tokens_without) for r in requests])),
        Series("with masking (as it went out)",
               _points([(r.number, r.tokens_with) for r in requests])),
    ]
    notes = ["Estimated input tokens: the conversation list and the system prompt in "
             "cl100k_base tokens, framed as the replay frames them (tool definitions left out). "
             "A request whose body is not its format's JSON has no estimate."]
    # Drawn only where it tells something: a request the replay would send
    # otherwise than it went out (flows recorded without obsmask, or under
    # other settings).
    if any(value is not None and value != r.tokens_with
           for r, (_, value) in zip(requests, replayed, strict=True)):
        series.append(Series("with masking, replayed under the policy", _points(replayed),
                             dashed=True))
        notes.append("The dashed line is the request as the replayed policy would send it "
                     "(the policy is stated above); it differs from what went out.")
    if any(value is not None for _, value in provider):
        series.append(Series("prompt tokens the provider reported", _points(provider),
                             dashed=True))
    else:
        notes.append("The provider reported no usage for these requests.")
    rows = tuple(
        (r.number, r.flow_number, ACTION_WORDS.get(r.action, r.action), r.tokens_without,
         r.tokens_with, _difference(r.tokens_without, r.tokens_with), replayed_tokens,
         provider_tokens)
        for r, (_, replayed_tokens), (_, provider_tokens) in zip(requests, replayed, provider,
                                                                 strict=True)
    )
    # The footer adds up the requests whose two bodies could be read.
    known = [r for r in requests if r.tokens_without is not None and r.tokens_with is not None]
    without = _sum_known([r.tokens_without for r in known])
    with_masking = _sum_known([r.tokens_with for r in known])
    return Figure(
        "tokens",
        LinePlot("Input tokens per request", REQUEST_AXIS, "Input tokens", tuple(series)),
        Table(("Request", "Flow", "obsmask", "Without masking", "With masking", "Saved",
               "Replayed with masking", "Provider: prompt tokens"), rows,
              footer=("All", None, None, without, with_masking,
                      _difference(without, with_masking),
                      _sum_known([value for _, value in replayed]),
                      _sum_known([value for _, value in provider]))),
        tuple(notes),
    )


def cache_figure(requests: Sequence[RequestNumbers]) -> Figure | None:
    """The share of each prompt the provider read from its cache; None
    when it reported nothing."""
    reported = [r for r in requests if r.provider is not None]
    if not reported:
        return None
    rows = []
    for r in reported:
        usage = r.provider
        assert usage is not None
        rows.append((r.number, usage.input_tokens, usage.cached_input_tokens,
                     usage.cache_creation_input_tokens, usage.prompt_tokens,
                     _fixed(usage.cached_percent, 1)))
    points = _points([(r.number, r.provider.cached_percent if r.provider else None)
                      for r in reported])
    return Figure(
        "cache",
        LinePlot("Share of the prompt the provider read from its cache", REQUEST_AXIS,
                 "Cached share of the prompt (%)",
                 (Series("cached share (provider-reported)", points),)),
        Table(("Request", "Input tokens (as reported)", "Read from the cache",
               "Written to the cache", "Prompt tokens", "Cached share (%)"), tuple(rows)),
        ("As the provider reported them: OpenAI's input tokens include the cached ones; "
         "Anthropic's count neither the tokens read from the cache nor those written to "
         "it, so its prompt is the sum of the three.",),
    )


def frontier_figure(requests: Sequence[RequestNumbers]) -> Figure:
    """Where the masking frontier stood at each request: tool turns before
    it are masked (when no rule keeps them), as obsmask recorded it and as
    the replayed policy places it."""
    tool_turns = [(r.number, r.tool_turns if r.tool_turns is not None
                   else (r.replayed.tool_turns if r.replayed else None)) for r in requests]
    series = [Series("tool turns in the request", _points(tool_turns))]
    recorded = _points([(r.number, r.frontier_turn) for r in requests])
    if recorded:
        series.append(Series("frontier, as obsmask recorded it", recorded))
    series.append(Series("frontier, replayed under the policy",
                         _points([(r.number, r.replayed.frontier_turn if r.replayed else None)
                                  for r in requests]), dashed=True))

    def as_sent(r: RequestNumbers) -> str | None:
        if r.replayed is None or r.replayed.as_sent is None:
            return None
        return "yes" if r.replayed.as_sent else "no"

    rows = tuple(
        (r.number, r.stage, r.frontier_turn, r.masked, r.clipped,
         r.replayed.stage if r.replayed else None,
         r.replayed.frontier_turn if r.replayed else None,
         r.replayed.masked if r.replayed else None,
         r.replayed.clipped if r.replayed else None,
         r.replayed.tool_turns if r.replayed else None, as_sent(r))
        for r in requests
    )
    notes = ["Tool turns before the frontier are masked unless a rule keeps them (the "
             "window, errors, short results...). A move of the frontier makes the provider "
             "bill again the history after it, so obsmask moves it when the bill allows."]
    if not recorded:
        notes.append("obsmask recorded no frontier for these requests (it did not mask "
                     "them): the replayed line shows where it would have stood.")
    return Figure(
        "frontier",
        LinePlot("The masking frontier, request by request", REQUEST_AXIS,
                 "Tool turn", tuple(series)),
        Table(("Request", "Stage", "Frontier", "Masked", "Clipped", "Replayed: stage",
               "Replayed: frontier", "Replayed: masked", "Replayed: clipped", "Tool turns",
               "Replayed = sent"), rows),
        tuple(notes),
    )


def ratio(with_masking: float, without: float) -> float | None:
    return with_masking / without if without else None


def bill_figure(bill: ModelBill, request_numbers: Sequence[int]) -> Figure:
    """The bill so far under one price model, with and without masking."""
    rows = tuple(
        (number, Fixed(without, 1), Fixed(masked, 1), _fixed(ratio(masked, without), 3))
        for number, without, masked in zip(request_numbers, bill.without_masking,
                                           bill.with_masking, strict=True)
    )
    return Figure(
        f"bill-{bill.name}",
        LinePlot(f"Bill so far under the “{bill.name}” price model", REQUEST_AXIS,
                 "Cost so far (input tokens at base price)", (
                     Series("without masking", _points(
                         list(zip(request_numbers, bill.without_masking, strict=True)))),
                     Series("with masking", _points(
                         list(zip(request_numbers, bill.with_masking, strict=True)))),
                 )),
        Table(("Request", "Without masking", "With masking", "Ratio"), rows),
        (f"{bill.description}.",),
    )


def mcp_figure(cuts: Sequence[McpCut]) -> Figure:
    """The characters of each cut MCP answer before and after, and the
    tokens saved, with their totals."""
    rows = tuple((c.number, c.flow_number, c.path, c.strings_cut, c.chars_before,
                  c.chars_after, c.tokens_saved) for c in cuts)
    uncounted = sum(1 for c in cuts if c.tokens_saved is None)
    notes = ["Characters of the strings obsmask cut in each answer, before and after; "
             "tokens saved as obsmask counted them (cl100k_base, the markers deducted)."]
    if uncounted:
        notes.append(f"{uncounted} answer(s) had too much text to count on the spot: "
                     "their tokens saved are unknown and left out of the total.")
    return Figure(
        "mcp",
        LinePlot("MCP answers cut", "MCP answer (in the files' order)", "Characters", (
            Series("characters before the cut",
                   _points([(c.number, c.chars_before) for c in cuts])),
            Series("characters after the cut",
                   _points([(c.number, c.chars_after) for c in cuts])),
        )),
        Table(("Answer", "Flow", "Path", "Strings cut", "Characters before",
               "Characters after", "Tokens saved"), rows,
              footer=("All", None, None, sum(c.strings_cut for c in cuts),
                      sum(c.chars_before for c in cuts), sum(c.chars_after for c in cuts),
                      sum(c.tokens_saved or 0 for c in cuts))),
        tuple(notes),
    )
