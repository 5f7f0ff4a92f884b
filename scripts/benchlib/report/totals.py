"""The totals at the top of the page: what obsmask did to every request of
the files, what the providers reported, what MCP truncation cut, and the
bills of every conversation added up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchlib.report.bills import ConversationBill
from benchlib.report.figures import Cell, Fixed, Table, ratio
from benchlib.report.mcp_cuts import McpCut
from benchlib.report.request_numbers import NO_RECORD, RequestNumbers


@dataclass(frozen=True)
class Totals:
    flows: int
    conversations: int
    requests: int
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


def _sum(values: Sequence[int | None]) -> int:
    return sum(value or 0 for value in values)


def totals(flows: int, conversations: int, requests: Sequence[RequestNumbers],
           cuts: Sequence[McpCut]) -> Totals:
    readable = [r for r in requests if r.tokens_without is not None and r.tokens_with is not None]
    usage = [r.provider for r in requests if r.provider is not None]
    return Totals(
        flows=flows,
        conversations=conversations,
        requests=len(requests),
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
    )


# (key, label, what it counts) of each row of the totals table.
TOTAL_ROWS = (
    ("flows", "Flows read", "every flow of the files, of any kind"),
    ("conversations", "Conversations", "named by a hash of the first user message"),
    ("requests", "Requests seen", "POSTs on the Chat Completions, Messages and Responses routes"),
    ("masked", "Masked", "requests obsmask sent with old tool results masked or clipped"),
    ("unchanged", "Left unchanged", "requests with nothing to mask"),
    ("passed_through", "Passed through", "requests obsmask could not mask (the reason is "
                                         "in the conversation's table)"),
    ("no_record", "No obsmask record", "requests without obsmask's metadata (recorded "
                                       "without it, or with masking off)"),
    ("masked_tool_results", "Tool results masked", "over every masked request"),
    ("clipped_tool_results", "Tool results clipped", "over every masked request"),
    ("tokens_saved", "Tokens saved", "the masked results' tokens before minus after, as "
                                     "obsmask counted them (cl100k_base)"),
    ("tokens_without", "Input tokens without masking", "estimated, every readable request"),
    ("tokens_with", "Input tokens with masking", "estimated, the same requests as they went out"),
    ("provider_reports", "Provider usage reports", "requests whose answer reported usage"),
    ("provider_input", "Provider-reported input tokens", "as reported: OpenAI's include "
                                                         "the cached ones, Anthropic's do not"),
    ("provider_cached", "Provider-reported cached input tokens", "read from the cache"),
    ("provider_cache_creation", "Provider-reported cache-creation tokens",
     "written to the cache (Anthropic)"),
    ("provider_prompt", "Provider-reported prompt tokens", "input, cached included, "
                                                         "whatever the format"),
    ("mcp_answers_cut", "MCP answers cut", "answers in which obsmask cut long strings"),
    ("mcp_strings_cut", "MCP strings cut", "over every cut answer"),
    ("mcp_chars_before", "MCP characters before the cut", "of the strings cut"),
    ("mcp_chars_after", "MCP characters after the cut", "of the same strings"),
    ("mcp_tokens_saved", "MCP tokens saved", "as obsmask counted them"),
)


def totals_table(figures: Totals) -> Table:
    rows: list[tuple[Cell, ...]] = []
    for key, label, meaning in TOTAL_ROWS:
        value = getattr(figures, key)
        assert isinstance(value, int)
        rows.append((label, value, meaning))
    return Table(("Total", "Value", "What it counts"), tuple(rows))


def bill_totals_table(bills: Sequence[ConversationBill]) -> Table | None:
    """Every conversation's bill, added up per price model; None when no
    conversation was billed."""
    if not bills:
        return None
    rows: list[tuple[Cell, ...]] = []
    for index, model in enumerate(bills[0].models):
        without = sum(bill.models[index].without_masking[-1] for bill in bills)
        with_masking = sum(bill.models[index].with_masking[-1] for bill in bills)
        share = ratio(with_masking, without)
        rows.append((model.name, Fixed(without, 1), Fixed(with_masking, 1),
                     Fixed(share, 3) if share is not None else None))
    return Table(("Price model", "Without masking", "With masking", "Ratio"), tuple(rows))
