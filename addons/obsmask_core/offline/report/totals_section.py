"""The totals at the top of the page: what obsmask did to every request of
the files, what the providers reported, what MCP truncation cut, and the
bills of every conversation added up.

The conversations of the holdout group (holdout_percent: left unmasked, as
the proxy leaves them) are counted and their bills added in, as the
provider bills them; the bill totals then also give the ratio of the other
conversations alone, which the held-out ones would dilute without a word."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.offline.report.bills import ConversationBill
from obsmask_core.offline.report.cut_answers import McpCut
from obsmask_core.offline.report.figures import Cell, Fixed, Table, ratio
from obsmask_core.offline.report.request_numbers import NO_RECORD, RequestNumbers
from obsmask_core.totals.cold import TurnFigures


@dataclass(frozen=True)
class PageTotals:
    flows: int
    conversations: int
    held_out: int  # conversations in the holdout group of the replay
    requests: int
    # Requests obsmask masked whose original (the backup) is missing or
    # unreadable: skipped, neither drawn nor billed.
    lost_originals: int
    masked: int
    unchanged: int
    passed_through: int
    no_record: int
    masked_tool_results: int
    clipped_tool_results: int
    tokens_saved: int  # the masked results' tokens, before minus after, as obsmask counted
    tokens_without: int  # estimated, the requests whose bodies could be read
    tokens_with: int
    provider_reports: int
    provider_input: int  # as reported (see ProviderFigures)
    provider_cached: int
    provider_cache_creation: int
    provider_prompt: int
    mcp_answers_cut: int
    mcp_strings_cut: int
    mcp_chars_before: int
    mcp_chars_after: int
    mcp_tokens_saved: int
    # The calls the model made again once masking took their result, each
    # counted in the request whose newest answer made it, and their cost.
    refetches: int = 0
    refetch_result_tokens: int = 0
    refetch_extra_turns: int = 0
    refetch_guarded_results: int = 0
    # As the proxy's ledger billed them: requests back after the cache's
    # lifetime, and the estimated saving on them and on warm ones.
    cold_requests: int = 0
    cold_saved: int = 0
    warm_saved: int = 0


def _sum(values: Sequence[int | None]) -> int:
    return sum(value or 0 for value in values)


def totals(flows: int, conversations: int, requests: Sequence[RequestNumbers],
           cuts: Sequence[McpCut], *, held_out: int = 0, lost_originals: int = 0) -> PageTotals:
    readable = [r for r in requests if r.tokens_without is not None and r.tokens_with is not None]
    usage = [r.provider for r in requests if r.provider is not None]
    found = [r.refetches for r in requests if r.refetches is not None]
    turns = TurnFigures.empty()
    for request in requests:
        if request.turn is not None:
            turns.add(request.turn, request.masked_tokens_saved)
    return PageTotals(
        flows=flows,
        conversations=conversations,
        held_out=held_out,
        requests=len(requests),
        lost_originals=lost_originals,
        masked=sum(1 for r in requests if r.action == "masked"),
        unchanged=sum(1 for r in requests if r.action == "unchanged"),
        passed_through=sum(1 for r in requests if r.action == "passed_through"),
        no_record=sum(1 for r in requests if r.action == NO_RECORD),
        masked_tool_results=_sum([r.masked for r in requests]),
        clipped_tool_results=_sum([r.clipped for r in requests]),
        tokens_saved=_sum([r.masked_tokens_saved for r in requests if r.action == "masked"]),
        tokens_without=_sum([r.tokens_without for r in readable]),
        tokens_with=_sum([r.tokens_with for r in readable]),
        provider_reports=len(usage),
        provider_input=_sum([u.input_tokens for u in usage]),
        provider_cached=_sum([u.cached_input_tokens for u in usage]),
        provider_cache_creation=_sum([u.cache_creation_input_tokens for u in usage]),
        provider_prompt=_sum([u.prompt_tokens for u in usage]),
        mcp_answers_cut=len(cuts),
        mcp_strings_cut=sum(c.strings_cut for c in cuts),
        mcp_chars_before=sum(c.chars_before for c in cuts),
        mcp_chars_after=sum(c.chars_after for c in cuts),
        mcp_tokens_saved=_sum([c.tokens_saved for c in cuts]),
        refetches=sum(f.new for f in found),
        refetch_result_tokens=sum(f.result_tokens for f in found),
        refetch_extra_turns=sum(f.extra_turns for f in found),
        refetch_guarded_results=sum(f.guarded_results for f in found),
        cold_requests=turns.cold.requests,
        cold_saved=round(turns.cold.saved),
        warm_saved=round(turns.warm.saved),
    )


# (key, label, what it counts) of each row of the totals table.
TOTAL_ROWS = (
    ("flows", "Flows read",
     "every flow of the files, of any kind"),
    ("conversations", "Conversations",
     "named by a hash of the first user message"),
    ("held_out", "Conversations held out",
     "in the holdout group (holdout_percent): left unmasked, as the proxy leaves them; their "
     "bills are in the totals"),
    ("requests", "Requests seen",
     "POSTs on the Chat Completions, Messages and Responses routes"),
    ("lost_originals", "Masked requests skipped",
     "masked when recorded, but their original (the flow's backup) is missing or cannot be "
     "read: neither drawn nor billed"),
    ("masked", "Masked",
     "requests obsmask sent with old tool results masked or clipped"),
    ("unchanged", "Left unchanged",
     "requests with nothing to mask"),
    ("passed_through", "Passed through",
     "requests obsmask could not mask (the reason is in the conversation's table)"),
    ("no_record", "No obsmask record",
     "requests without obsmask's metadata (recorded without it, or with masking off)"),
    ("masked_tool_results", "Tool results masked",
     "over every masked request"),
    ("clipped_tool_results", "Tool results clipped",
     "over every masked request"),
    ("tokens_saved", "Tokens saved",
     "the masked results' tokens before minus after, as obsmask counted them (cl100k_base)"),
    ("refetches", "Re-fetches",
     "tool calls the model made again after obsmask had masked the earlier same call's result, "
     "as the flows recorded them"),
    ("refetch_result_tokens", "Re-fetched result tokens",
     "the tokens of those calls' results (characters / 4)"),
    ("refetch_extra_turns", "Extra model turns",
     "answers that made nothing but re-fetches"),
    ("refetch_guarded_results", "Results kept by the re-fetch guard",
     "results of re-fetched calls kept whole (refetch_guard), summed over requests"),
    ("cold_requests", "Cold turns",
     "requests that came back after the provider's cache had expired (cold_turns): billed "
     "whole, masked or not, so masking more there costs nothing"),
    ("cold_saved", "Estimated saving on cold turns",
     "what masking saved on those requests by the proxy's ledger (input tokens at the base "
     "price)"),
    ("warm_saved", "Estimated saving on warm turns",
     "the same on every other request with a bill (below 0 where moves re-billed more)"),
    ("tokens_without", "Input tokens without masking",
     "estimated, every readable request"),
    ("tokens_with", "Input tokens with masking",
     "estimated, the same requests as they went out"),
    ("provider_reports", "Provider usage reports",
     "requests whose answer reported usage"),
    ("provider_input", "Provider-reported input tokens",
     "as reported: OpenAI's include the cached ones, Anthropic's do not"),
    ("provider_cached", "Provider-reported cached input tokens",
     "read from the cache"),
    ("provider_cache_creation", "Provider-reported cache-creation tokens",
     "written to the cache (Anthropic)"),
    ("provider_prompt", "Provider-reported prompt tokens",
     "input, cached included, whatever the format"),
    ("mcp_answers_cut", "MCP answers cut",
     "answers in which obsmask cut long strings"),
    ("mcp_strings_cut", "MCP strings cut",
     "over every cut answer"),
    ("mcp_chars_before", "MCP characters before the cut",
     "of the strings cut"),
    ("mcp_chars_after", "MCP characters after the cut",
     "of the same strings"),
    ("mcp_tokens_saved", "MCP tokens saved",
     "as obsmask counted them"),
)


def totals_table(figures: PageTotals) -> Table:
    rows: list[tuple[Cell, ...]] = []
    for key, label, meaning in TOTAL_ROWS:
        value = getattr(figures, key)
        assert isinstance(value, int)
        rows.append((label, value, meaning))
    return Table(("Total", "Value", "What it counts"), tuple(rows))


def _final_bills(bills: Sequence[ConversationBill], index: int) -> tuple[float, float]:
    """(without, with masking) of model ``index``, added up over ``bills``."""
    return (sum(bill.models[index].without_masking[-1] for bill in bills),
            sum(bill.models[index].with_masking[-1] for bill in bills))


def _ratio_cell(with_masking: float, without: float) -> Fixed | None:
    share = ratio(with_masking, without)
    return Fixed(share, 3) if share is not None else None


def bill_totals_table(bills: Sequence[ConversationBill]) -> Table | None:
    """Every conversation's bill, added up per price model; None when no
    conversation was billed. When some are held out, a last column gives
    the ratio of the others alone (none when every one is held out)."""
    if not bills:
        return None
    others = [bill for bill in bills if not bill.held_out]
    some_held_out = len(others) < len(bills)
    rows: list[tuple[Cell, ...]] = []
    for index, model in enumerate(bills[0].models):
        without, with_masking = _final_bills(bills, index)
        row: tuple[Cell, ...] = (model.name, Fixed(without, 1), Fixed(with_masking, 1),
                                 _ratio_cell(with_masking, without))
        if some_held_out:
            others_without, others_with = _final_bills(others, index)
            row += (_ratio_cell(others_with, others_without),)
        rows.append(row)
    columns: tuple[str, ...] = ("Price model", "Without masking", "With masking", "Ratio")
    if some_held_out:
        columns += ("Ratio, conversations not held out",)
    return Table(columns, tuple(rows))
