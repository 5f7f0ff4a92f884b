"""The totals of a run: every flow's facts added once, per conversation and
for the whole run, and what they come to under the price model."""

from __future__ import annotations

import copy
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from obsmask_core.shared.request_record import UsageKey
from obsmask_core.totals.facts import BillFacts, McpFacts, RequestFacts
from obsmask_core.totals.running_sums import McpFigures, RequestFigures

CENTS_PER_DOLLAR = 100
# The latest bill of this many conversations is kept by name (each takes
# little memory: docs/benchmarks.md); a conversation seen again after that
# many others has its earlier bill counted once more.
BILLS_KEPT = 100_000
TOKENS_PER_MILLION = 1_000_000


def _add_bill(sums: dict[str, list[float]], bill: BillFacts) -> None:
    figures = sums.setdefault(bill.price_model, [0, 0.0, 0.0])
    figures[0] += 1
    figures[1] += bill.with_masking
    figures[2] += bill.without_masking


def dollars(tokens: float, cents_per_million: int) -> float:
    return tokens * cents_per_million / TOKENS_PER_MILLION / CENTS_PER_DOLLAR


@dataclass
class ConversationEntry:
    figures: RequestFigures = field(default_factory=RequestFigures)
    # The ledger's bill at the conversation's latest request (the most
    # requests: answers may end out of order).
    bill: BillFacts | None = None


@dataclass(frozen=True)
class BillTotal:
    """The latest bill of every conversation under one price model, added up
    (estimates, in input tokens at the base price)."""

    price_model: str
    conversations: int
    with_masking: float
    without_masking: float

    def as_json(self, cents_per_million: int) -> dict[str, object]:
        saved = self.without_masking - self.with_masking
        out: dict[str, object] = {
            "conversations": self.conversations,
            "estimated_with_masking": round(self.with_masking, 1),
            "estimated_without_masking": round(self.without_masking, 1),
            "estimated_saved": round(saved, 1),
            "ratio": round(self.with_masking / self.without_masking, 4)
            if self.without_masking else None,
        }
        if cents_per_million:
            out["estimated_saved_usd"] = round(dollars(saved, cents_per_million), 4)
        return out


class Totals:
    """Adds up the facts of each flow once.

    The whole run's figures count every flow; the figures of the most
    recently active ``conversations_kept`` conversations are kept one by
    one, and the latest bill of the ``bills_kept`` most recent ones, by
    name and run (two runs of one task share a name: each has its own
    bill): the run's bill is the sum of every conversation's latest bill.
    """

    def __init__(self, conversations_kept: int = 1000, cents_per_million: int = 0,
                 bills_kept: int = BILLS_KEPT) -> None:
        self.conversations_kept = conversations_kept
        self.cents_per_million = cents_per_million
        self.bills_kept = bills_kept
        self.started = time.time()
        self.requests = RequestFigures()
        self.mcp = McpFigures()
        self.conversations: OrderedDict[str, ConversationEntry] = OrderedDict()
        # The conversations seen, the most recently active last, with their
        # latest bill (None: no ledger); beyond bills_kept, the least recent
        # ones are retired: their bills stay in the sums, their names go.
        self._latest: OrderedDict[str, BillFacts | None] = OrderedDict()
        self._retired: dict[str, list[float]] = {}
        self._retired_count = 0

    def add_flow(self, conversation_facts: object, mcp_facts: object) -> RequestFacts | None:
        """Add one finished flow's metadata values (either may be absent);
        the conversation request's facts, if it was one."""
        request = RequestFacts.read(conversation_facts)
        if request is not None:
            self._add_request(request)
        mcp = McpFacts.read(mcp_facts)
        if mcp is not None:
            self.mcp.add(mcp)
        return request

    def _add_request(self, facts: RequestFacts) -> None:
        self.requests.add(facts)
        if facts.conversation is None:
            return
        entry = self.conversations.pop(facts.conversation, None) or ConversationEntry()
        self.conversations[facts.conversation] = entry  # now the most recent
        while len(self.conversations) > self.conversations_kept:
            self.conversations.popitem(last=False)
        entry.figures.add(facts)
        # Each run of the conversation has a bill of its own; the bill of
        # a run's first request (no answer yet) is in every later one's.
        run = facts.conversation if facts.session is None else \
            f"{facts.conversation} {facts.session}"
        if facts.session is not None:
            self._latest.pop(facts.conversation, None)
        bill, latest = facts.bill, self._latest.pop(run, None)
        if bill is not None and (latest is None or bill.requests >= latest.requests):
            latest = entry.bill = bill
        self._latest[run] = latest
        while len(self._latest) > self.bills_kept:
            _, retired = self._latest.popitem(last=False)
            self._retired_count += 1
            if retired is not None:
                _add_bill(self._retired, retired)

    @property
    def conversations_seen(self) -> int:
        return len(self._latest) + self._retired_count

    def bill_totals(self) -> list[BillTotal]:
        """The bill of all conversations so far, per price model."""
        sums = {model: list(figures) for model, figures in self._retired.items()}
        for bill in self._latest.values():
            if bill is not None:
                _add_bill(sums, bill)
        return [BillTotal(model, int(n), with_masking, without_masking)
                for model, (n, with_masking, without_masking) in sorted(sums.items())]

    def copy(self) -> Totals:
        """A copy to add unfinished flows to, leaving these totals as they are."""
        return copy.deepcopy(self)

    def as_json(self, *, conversations: bool = True) -> dict[str, object]:
        """The totals as one JSON document (``/obsmask/totals``)."""
        out: dict[str, object] = {
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "conversations_seen": self.conversations_seen,
            "requests": self.requests.as_json(),
            "bill": {total.price_model: total.as_json(self.cents_per_million)
                     for total in self.bill_totals()},
            "mcp": self.mcp.as_json(),
        }
        if conversations:
            out["conversations"] = {
                name: _conversation_json(entry, self.cents_per_million)
                for name, entry in self.conversations.items()}
        return out

    def net_line(self) -> str:
        """The net figure in one line, the one that leads obsmask report's
        page: the bill with masking over the bill without (the ledger's
        estimate, per price model), told apart from the tokens not sent."""
        not_sent = f"{self.requests.tokens_saved:,} input tokens not sent"
        parts = [
            f"{total.with_masking / total.without_masking:.3f}× "
            f"({total.with_masking / total.without_masking - 1:+.1%}) under {total.price_model}"
            f" ({total.conversations:,} conversation(s))"
            for total in self.bill_totals() if total.without_masking
        ]
        if not parts:
            return (f"totals: net bill: no estimate (no price model with a cache); "
                    f"{not_sent}, which is the saving only where the provider has no "
                    "prompt cache")
        return ("totals: net bill with obsmask over the bill without, estimated: "
                + ", ".join(parts) + f"; not the {not_sent}, which is no bill: a masked "
                "result makes a caching provider bill again what follows it")

    def bill_lines(self) -> list[str]:
        """The bill of every conversation added up, a line per price model."""
        lines = []
        for total in self.bill_totals():
            saved = total.without_masking - total.with_masking
            ratio = f" ({total.with_masking / total.without_masking - 1:+.1%})" \
                if total.without_masking else ""
            money = (f", about ${dollars(saved, self.cents_per_million):,.2f}"
                     if self.cents_per_million else "")
            lines.append(
                f"totals: bill estimate ({total.price_model}, {total.conversations:,} "
                f"conversation(s)): {total.with_masking:,.0f} input tokens at base price with "
                f"masking, {total.without_masking:,.0f} without{ratio}; saved "
                f"{saved:,.0f}{money}")
        return lines

    def summary_lines(self) -> list[str]:
        """The end-of-run summary, a few log lines."""
        r, m = self.requests, self.mcp
        lines = [
            f"totals: {r.requests:,} conversation request(s): {r.masked:,} masked, "
            f"{r.unchanged:,} unchanged"
            # Named only when there are some: the log's word for a request
            # obsmask could not read, which a reader looks for.
            + (f", {r.passed_through:,} passed through" if r.passed_through else "")
            + (f" ({r.held_out:,} held out)" if r.held_out else "")
            + f"; {r.tool_results_masked:,} tool results masked"
            + (f", {r.tool_results_clipped:,} clipped" if r.tool_results_clipped else "")
            + (f", {r.tool_results_recalled:,} recalled" if r.tool_results_recalled else "")
            + f"; {r.tokens_saved:,} input tokens not sent"
            + (f" ({r.masked_requests_uncounted:,} masked request(s) not counted)"
               if r.masked_requests_uncounted else ""),
        ]
        if r.requests:
            lines.append(self.net_line())
        if r.refetches:
            lines.append(f"totals: {r.refetches.describe()}")
        lines += self.bill_lines()
        if r.provider_reports:
            p = r.provider
            lines.append(
                f"totals: the provider reported {r.provider_reports:,} answer(s): "
                f"{p[UsageKey.INPUT_TOKENS]:,} input, "
                f"{p[UsageKey.CACHED_INPUT_TOKENS]:,} cached input, "
                f"{p[UsageKey.CACHE_CREATION_INPUT_TOKENS]:,} written to the cache, "
                f"{p[UsageKey.OUTPUT_TOKENS]:,} output tokens")
        if (brake := r.brake).tripped or brake.braked_requests:
            lines.append(
                f"totals: provider brake: {brake.tripped:,} conversation(s) stopped, "
                f"{brake.braked_requests:,} request(s) planned braked; the provider billed "
                f"{brake.surprise:,.0f} tokens beyond the ledger's prediction over "
                f"{brake.weighed:,} answer(s)")
        if r.turns.cold.requests:
            lines.append(f"totals: cold turns: {r.turns.describe()}")
        for (fmt, cache), figures in sorted(r.cache.items()):
            lines.append(
                f"totals: cache predicted vs reported ({fmt}, {cache}; {figures.requests:,} "
                f"answer(s)): {figures.describe()}")
        if m.answers:
            lines.append(
                f"totals: {m.answers:,} MCP answer(s), {m.answers_truncated:,} cut "
                f"({m.strings_cut:,} string(s)): {m.chars_saved:,} chars and "
                f"{m.tokens_saved:,} tokens saved"
                + (f" ({m.answers_uncounted:,} not counted)" if m.answers_uncounted else ""))
        return lines


def _conversation_json(entry: ConversationEntry, cents_per_million: int) -> dict[str, object]:
    out = entry.figures.as_json()
    if (bill := entry.bill) is not None:
        figures = BillTotal(bill.price_model, 1, bill.with_masking,
                            bill.without_masking).as_json(cents_per_million)
        del figures["conversations"]
        out = {**out, "bill": {"price_model": bill.price_model, "requests": bill.requests,
                               **figures}}
    return out
