"""scripts/report.py's work, from flow files to the page: read the flows,
group them by conversation, measure each request, replay each conversation
for its bill, then lay the page out.

Two things the page says in words, as measure.py does: the conversations
of the holdout group (holdout_percent), which the replay leaves unmasked as
the proxy does (named in their titles, counted at the top, their bills in
the totals beside the ratio of the others); and the requests obsmask masked
whose original is missing, skipped (listed at the top)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from obsmask_core.conversation.masking.summary import describe_policy
from obsmask_core.conversation.planning.memory import PlanMemory
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from obsmask_core.offline.cache.block_tokens import MessageTokens, load_encoder
from obsmask_core.offline.proxy_bill import proxy_bill_lines
from obsmask_core.offline.report.bills import ConversationBill, bill_conversation
from obsmask_core.offline.report.conversations import Conversation, group_conversations
from obsmask_core.offline.report.cut_answers import McpCut, mcp_cuts
from obsmask_core.offline.report.figures import (
    Figure,
    bill_figure,
    cache_figure,
    frontier_figure,
    mcp_figure,
    token_figure,
)
from obsmask_core.offline.report.flow_file import LostOriginal, read_flow_files
from obsmask_core.offline.report.headline import Saving, saving, saving_figure, saving_line
from obsmask_core.offline.report.html_page import Page, Section, render_page
from obsmask_core.offline.report.policy_choice import PolicyChooser, UserSettings, recorded_settings
from obsmask_core.offline.report.refetches import refetch_paragraph
from obsmask_core.offline.report.replayed_plans import replay_plan
from obsmask_core.offline.report.request_numbers import RequestNumbers, request_numbers
from obsmask_core.offline.report.totals_section import bill_totals_table, totals, totals_table
from obsmask_core.shared.request_record import Action, Key

TITLE = "obsmask report"
BILL_NOTE = (
    "Bills are in input tokens at the model's base price (1 = one input token without a "
    "cache), for the tool definitions, the system prompt and the conversation list, counted "
    "with cl100k_base. Each conversation's requests as the client sent them are replayed: "
    "masked as the proxy would under the policy its section states, and billed against "
    "the previous request under "
    "each price model's cache rule (a cached prefix from 1,024 tokens; OpenAI's in steps "
    "of 128). anthropic: reads 0.1, every uncached token a write at 1.25; openai: cached "
    "0.1, uncached 1.0; openai_50: cached 0.5; none: no cache, every token 1.0."
)


@dataclass(frozen=True)
class ConversationReport:
    section: Section
    requests: list[RequestNumbers]
    bill: ConversationBill | None
    held_out: bool = False  # in the holdout group of its replay
    saving: Saving | None = None  # the page's headline for it


def _sources(conversation: Conversation) -> str:
    names = dict.fromkeys(r.recorded.source for r in conversation.requests)
    return ", ".join(names)


def _other_section(conversation: Conversation, tokens: MessageTokens) -> ConversationReport:
    numbers = [request_numbers(r, tokens, None) for r in conversation.requests]
    reasons = dict.fromkeys(r.reason for r in numbers if r.reason)
    paragraphs = [
        f"{len(numbers)} request(s) on a conversation route whose body could not be read as "
        "its format, so they have no conversation and are not replayed; they count in the "
        "totals." + (f" obsmask said: {'; '.join(reasons)}." if reasons else ""),
        "Flows: " + ", ".join(f"{r.recorded.source} #{r.recorded.flow_number} "
                              f"{r.recorded.path}" for r in conversation.requests) + ".",
    ]
    figures: list[Figure] = [token_figure(numbers)]
    cache = cache_figure(numbers)
    if cache is not None:
        figures.append(cache)
    return ConversationReport(Section("other", conversation.title, tuple(paragraphs),
                                      tuple(figures)), numbers, None)


def _holdout_paragraphs(conversation: Conversation, policy: MaskPolicy,
                        held_out: bool) -> list[str]:
    """What the page says of the holdout for one conversation: that it is
    held out, and whether the flows say otherwise (obsmask records
    ``holdout`` on the requests it left alone for it, and masks none)."""
    recorded = [r.recorded.masking for r in conversation.requests]
    recorded_held_out = any(m.get(Key.HOLDOUT) is True for m in recorded)
    recorded_masked = any(m.get(Key.ACTION) == Action.MASKED for m in recorded)
    paragraphs = []
    if held_out:
        paragraphs.append(
            f"Held out (holdout_percent = {policy.holdout_percent}): obsmask leaves this "
            "conversation unmasked, so the replay does too, and its bill with masking is its "
            "bill without. It counts in the totals, as the holdout group is there to compare "
            "its bills with those of the masked conversations.")
    if held_out and recorded_masked:
        paragraphs.append("When the flows were recorded obsmask masked this conversation: it "
                          "was not held out then.")
    elif not held_out and recorded_held_out:
        paragraphs.append("When the flows were recorded obsmask held this conversation out "
                          "(holdout_percent): this replay masks it.")
    return paragraphs


def conversation_report(conversation: Conversation, chooser: PolicyChooser,
                        tokens: MessageTokens) -> ConversationReport:
    fmt = conversation.fmt
    if fmt is None:
        return _other_section(conversation, tokens)
    replay = chooser.for_conversation(
        recorded_settings(r.recorded.masking for r in conversation.requests))
    memory = PlanMemory()
    numbers = [
        request_numbers(r, tokens, replay_plan(r.original, r.sent, fmt, replay.policy, tokens,
                                               memory)
                        if r.original is not None else None)
        for r in conversation.requests
    ]
    bill = bill_conversation([(r.number, r.original) for r in conversation.requests
                              if r.original is not None], fmt, replay.policy, tokens)
    held_out = any(r.replayed.held_out for r in numbers if r.replayed is not None)
    if bill is not None:
        bill = replace(bill, held_out=held_out)
    checked = [r.replayed.as_sent for r in numbers
               if r.replayed is not None and r.replayed.as_sent is not None]
    paragraphs = [
        f"{len(numbers)} request(s) from {_sources(conversation)}.",
        "Replayed (the bill, and the dashed lines of the replay) under: "
        + describe_policy(replay.policy, replay.source) + ".",
        *_holdout_paragraphs(conversation, replay.policy, held_out),
    ]
    if (refetches := refetch_paragraph(numbers)) is not None:
        paragraphs.append(refetches)
    if checked:
        paragraphs.append(
            f"Replayed under this policy, {sum(checked)} of {len(checked)} request(s) come "
            "out exactly as they were sent"
            + (": the bill with masking is the bill of what went out." if all(checked)
               else ": the bill with masking is what this policy would cost, not the bill "
                    "of what went out."))
    if replay.differences:
        paragraphs.append("The flows recorded other settings: "
                          + "; ".join(replay.differences) + ".")
    if bill is not None and bill.restarts:
        paragraphs.append(
            "The client rewrote its history at request(s) "
            + ", ".join(str(n) for n in bill.restarts)
            + ": the replay starts a new run there, with nothing in the cache.")
    figures: list[Figure] = [token_figure(numbers)]
    cache = cache_figure(numbers)
    if cache is not None:
        figures.append(cache)
    figures.append(frontier_figure(numbers))
    if bill is not None:
        figures += [bill_figure(model, bill.request_numbers) for model in bill.models]
    title = conversation.title + (", held out" if held_out else "")
    anchor = f"{conversation.name}-{fmt.name}"
    section = Section(anchor, title, tuple(paragraphs), tuple(figures))
    headline = (saving(anchor, title, bill, numbers, replay.policy.price_model,
                       fmt == ANTHROPIC) if bill is not None else None)
    return ConversationReport(section, numbers, bill, held_out, headline)


def _mcp_section(cuts: Sequence[McpCut]) -> Section:
    return Section("mcp", "MCP answers cut", (
        f"{len(cuts)} MCP answer(s) in which obsmask cut long strings to a head, a marker "
        "and a tail.",), (mcp_figure(cuts),))


def _held_out_statement(held_out: int, conversations: int, policy: MaskPolicy) -> str:
    verb = "is" if held_out == 1 else "are"
    return (f"{held_out} of the {conversations} conversation(s) {verb} held out "
            f"(holdout_percent = {policy.holdout_percent}): obsmask leaves held-out "
            "conversations unmasked, so the replay does too and their bills with and without "
            "masking are equal. They are in the totals, "
            "as the provider bills them (the holdout group is there to compare bills), which "
            "brings the ratio closer to 1: the bill totals also give the ratio of the "
            "conversations not held out, and each held-out conversation says so in its title.")


def _lost_originals_statement(lost: Sequence[LostOriginal]) -> str:
    return (f"{len(lost)} request(s) obsmask masked skipped, neither drawn nor billed: their "
            "original (the flow's backup) is missing or cannot be read, so what the client "
            "sent is unknown, and the masked body is not it (measure.py skips them too): "
            + ", ".join(f"{r.source} #{r.flow_number} {r.path}" for r in lost) + ".")


def build_report(paths: Sequence[Path], settings: UserSettings) -> tuple[str, int, int]:
    """The page's HTML, its conversation count and its request count;
    OfflineError for a file or setting that cannot be used."""
    chooser = PolicyChooser(settings)
    recorded = read_flow_files(paths, chooser.routes())
    conversations = group_conversations(recorded.requests)
    tokens = MessageTokens(load_encoder())
    reports = [conversation_report(c, chooser, tokens) for c in conversations]
    cuts = mcp_cuts(recorded.mcp_cuts)
    requests = [number for report in reports for number in report.requests]
    bills = [report.bill for report in reports if report.bill is not None]
    sections = [report.section for report in reports]
    if cuts:
        sections.append(_mcp_section(cuts))
    named = sum(1 for c in conversations if c.fmt is not None)
    intro = [
        "Made by obsmask report from " + ", ".join(Path(p).name for p in recorded.files)
        + f" ({recorded.flows} flows) on "
        + datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC") + ".",
        "Per conversation: the input tokens of each request with and without masking and "
        "the share the provider read from its cache, the moves of the masking frontier, "
        "and the bill so far under each price model, and the re-fetches the flows recorded "
        "(calls the model made again once masking took their result); then the MCP answers "
        "cut. Every plot has the table of its numbers beside it.",
        "Settings of the replay: " + chooser.source_statement() + ".",
    ]
    held_out = sum(report.held_out for report in reports)
    if held_out:
        intro.append(_held_out_statement(held_out, named, chooser.in_force.policy))
    if recorded.lost_originals:
        intro.append(_lost_originals_statement(recorded.lost_originals))
    savings = [report.saving for report in reports if report.saving is not None]
    page = Page(
        title=TITLE,
        intro=tuple(intro),
        proxy_bill=proxy_bill_lines(paths, chooser.routes(), chooser.in_force.policy),
        saved=tuple(saving_line(s) for s in savings) or (
            "No conversation to bill: nothing saved or spent.",),
        saved_figures=tuple(saving_figure(s) for s in savings),
        totals=totals_table(totals(recorded.flows, named, requests, cuts, held_out=held_out,
                                   lost_originals=len(recorded.lost_originals))),
        bill_totals=bill_totals_table(bills),
        bill_note=BILL_NOTE,
        sections=tuple(sections),
    )
    return render_page(page), named, len(requests)
