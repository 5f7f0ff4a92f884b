"""A prompt cache of breakpoints, as the ledger prices a request under it
(``cache_billing``): a request writes an entry only at its breakpoints, and
reads the longest entry that is one of its own prefixes within the reach
of one of them (``CacheReach``).

- Anthropic's: the client's ``cache_control`` breakpoints, read within
  about 20 blocks of one (``ANTHROPIC_REACH``).
- OpenAI's from GPT-5.6 on: one implicit breakpoint near the latest user or
  tool message, taken to be the request's end, matched exactly (no shorter
  unmarked prefix is read) among the latest 80 breakpoints written, with
  no lookback in blocks (``OPENAI_REACH``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.conversation.billing.breakpoints import (
    LENIENT_LOOKBACK_BLOCKS,
    LOOKBACK_BLOCKS,
    CacheLayout,
)
from obsmask_core.conversation.billing.cache_billing import (
    BillingState,
    BreakpointState,
    Forwarded,
)
from obsmask_core.conversation.billing.price_models import PRICE_UNIT, PriceModel


@dataclass(frozen=True)
class CacheReach:
    """How far back a breakpoint reads: within ``forwarded_blocks`` block
    boundaries for what obsmask forwards and ``sent_blocks`` for the
    request as the client sent it (None: no limit), and only among the
    latest ``entries`` breakpoints written (None: all)."""

    forwarded_blocks: int | None
    sent_blocks: int | None
    entries: int | None


ANTHROPIC_REACH = CacheReach(LOOKBACK_BLOCKS, LENIENT_LOOKBACK_BLOCKS, None)
# "OpenAI considers up to the latest 80 breakpoints in the conversation,
# without a content-block lookback limit." The strict reading counts every
# breakpoint the conversation wrote, this request's own among them: 79
# earlier ones are read.
OPENAI_BREAKPOINTS_CONSIDERED = 80
OPENAI_REACH = CacheReach(None, None, OPENAI_BREAKPOINTS_CONSIDERED)


class BreakpointBilling:
    """Anthropic's cache, at the boundaries between items (every breakpoint
    the ledger knows of closes an item: the end of a request, the frontier's,
    the end of the system), with the lookback counted in blocks
    (``blocks_before``: the blocks of the items before each item, filled in
    by the frontier as it measures them)."""

    name = "breakpoints"

    def __init__(self, model: PriceModel, layout: CacheLayout,
                 blocks_before: Sequence[int], reach: CacheReach = ANTHROPIC_REACH,
                 name: str = "breakpoints") -> None:
        self.name = name
        self._reach = reach
        self._writes = 0  # entries written so far, as forwarded
        self._read = model.read
        self._write = (model.long_write or model.uncached) if layout.long_lived \
            else model.uncached
        self._layout = layout
        self._blocks_before = blocks_before
        self._preamble = layout.preamble_tokens
        # The tools and system are an entry of their own once written, when
        # the client marks them.
        self._system_entry = layout.outside_messages > 0 and self._preamble >= self.minimum
        self._entries: list[tuple[int, int, int]] = []  # as forwarded
        # The item boundaries the last request recorded wrote at.
        self._last_written: frozenset[int] = frozenset()
        self._previous_end: int | None = None  # as sent
        self._previous_tokens = 0
        self._predicted = (0, 0, 0)
        self._points: tuple[int | None, int | None] = (None, None)

    @property
    def minimum(self) -> int:
        return self._layout.minimum_tokens

    @property
    def preamble_tokens(self) -> int:
        return self._preamble

    @property
    def system_entry(self) -> bool:
        """Do the tools and system make an entry of their own?"""
        return self._system_entry

    def prediction_points(self) -> tuple[int | None, int | None]:
        """For the last forwarded request recorded: the item boundaries the
        provider should read it up to and write it up to (0: the tools and
        system alone; None: nothing)."""
        return self._points

    def smallest_saving(self, tokens: int, allowance_percent: int) -> int:
        return 0  # entries end where breakpoints are: no steps

    def _reaches(self, entry: int, mark: int, lookback: int | None) -> bool:
        """Does a breakpoint closing item boundary ``mark`` read an entry at
        ``entry``, within ``lookback`` block boundaries? The forwarded
        request is billed under the strict reading of the documented
        lookback (``LOOKBACK_BLOCKS``), the request as the client sent it
        under the lenient one (``LENIENT_LOOKBACK_BLOCKS``): a move the
        ledger allows then pays under either."""
        blocks = self._blocks_before
        return entry <= mark and (lookback is None or blocks[mark] - blocks[entry] < lookback)

    def _oldest_unread_write(self) -> int:
        """Entries of this write number and earlier are no longer read: only
        the latest ``entries`` written are considered (-1: all are)."""
        kept = self._reach.entries
        return -1 if kept is None else self._writes - kept

    def _floor(self) -> int:
        """What every request after the first reads at least: the system."""
        return self._preamble if self._system_entry and self._previous_end is not None else 0

    def _cost(self, total: int, read: int, last_mark: int) -> int:
        return self._read * read + self._write * (last_mark - read) \
            + PRICE_UNIT * (total - last_mark)

    def _written(self, marks: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The breakpoints that write an entry: none under the minimum (the
        provider bills such a prompt as plain input)."""
        return [(mark, tokens) for mark, tokens in marks if tokens >= self.minimum]

    def _last_mark(self, written: list[tuple[int, int]]) -> int:
        """The tokens up to the last breakpoint that writes (``_written``; the
        system's, or none, when no message breakpoint does)."""
        if written:
            return written[-1][1]
        return self._preamble if self._system_entry else 0

    def plain_cost(self, end: int, tokens: int) -> int:
        total = self._preamble + tokens
        read = self._floor()
        previous = self._previous_end
        if self._layout.marks_end and previous is not None \
                and self._reaches(previous, end, self._reach.sent_blocks) \
                and self._preamble + self._previous_tokens >= self.minimum:
            read = self._preamble + self._previous_tokens
        marks = [(end, total)] if self._layout.marks_end else []
        return self._cost(total, read, self._last_mark(self._written(marks)))

    def _marks(self, forwarded: Forwarded) -> list[tuple[int, int]]:
        marks = []
        if forwarded.frontier is not None:
            marks.append((forwarded.frontier, self._preamble + forwarded.frontier_tokens))
        if self._layout.marks_end:
            marks.append((forwarded.end, self._preamble + forwarded.tokens))
        return marks

    def _reading(self, forwarded: Forwarded,
                 marks: list[tuple[int, int]]) -> tuple[int, int | None]:
        """The tokens read from the cache, and the item boundary where the
        entry read ends (0: the tools and system; None: nothing read)."""
        floor = self._floor()
        read, at = floor, (0 if floor else None)
        if not marks:
            return read, at
        # ``_reaches`` unrolled: this loop runs for every entry kept, for
        # every request the ledger replays.
        changed = forwarded.changed_at
        latest = max(mark for mark, _ in marks)
        limit = latest if changed is None else min(latest, changed)
        oldest = self._oldest_unread_write()
        lookback = self._reach.forwarded_blocks
        blocks = self._blocks_before
        # Per breakpoint: the entries it reaches begin after this many
        # blocks (none when there is no lookback).
        reach = None if lookback is None else [
            (mark, blocks[mark] - lookback) for mark, _ in marks]
        for entry, tokens, write in self._entries:
            if tokens <= read or entry > limit or write <= oldest:
                continue
            if reach is not None and not any(
                    entry <= mark and blocks[entry] > first for mark, first in reach):
                continue
            read, at = tokens, entry
        return read, at

    def masked_cost(self, forwarded: Forwarded) -> int:
        marks = self._marks(forwarded)
        total = self._preamble + forwarded.tokens
        return self._cost(total, self._reading(forwarded, marks)[0],
                          self._last_mark(self._written(marks)))

    def record(self, end: int, plain_tokens: int, forwarded: Forwarded) -> int:
        marks = self._marks(forwarded)
        total = self._preamble + forwarded.tokens
        read, read_at = self._reading(forwarded, marks)
        written = self._written(marks)
        last = self._last_mark(written)
        cost = self._cost(total, read, last)
        self._predicted = (read, last - read, total)
        written_to = written[-1][0] if written else (0 if self._system_entry else None)
        self._points = (read_at, written_to if last > read else read_at)
        changed = forwarded.changed_at
        limit = changed if changed is not None else float("inf")
        oldest = self._oldest_unread_write()
        entries = [kept for kept in self._entries if kept[0] <= limit and kept[2] > oldest]
        for mark, tokens in written:
            # Written again, an entry lives on as the latest.
            entries = [kept for kept in entries if kept[0] != mark]
            entries.append((mark, tokens, self._writes))
            self._writes += 1
        self._entries = entries
        self._last_written = frozenset(mark for mark, _ in written)
        self._previous_end, self._previous_tokens = end, plain_tokens
        return cost

    def expire(self) -> None:
        # The tools and system's entry goes too. Another conversation with
        # the same ones may have kept it: both bills count it alike, so no
        # move depends on it.
        self._entries = []
        self._previous_end, self._previous_tokens = None, 0

    def doubt(self) -> None:
        """Only the entries the last request wrote (at its breakpoints) are
        sure to live on; the tools and system's, written at the client's
        breakpoint on every request, too."""
        self._entries = [kept for kept in self._entries if kept[0] in self._last_written]

    def forget_before(self, lowest_mark: int) -> None:
        """No later breakpoint closes an item boundary before ``lowest_mark``
        (ends grow, the frontier only moves forward): an entry too far
        behind it is never read again."""
        lowest = self._blocks_before[lowest_mark]
        lookback = self._reach.forwarded_blocks
        if lookback is None:
            return
        self._entries = [kept for kept in self._entries
                         if lowest - self._blocks_before[kept[0]] < lookback]

    def predicted(self) -> tuple[int, int, int]:
        return self._predicted

    def state(self) -> BreakpointState:
        return BreakpointState(tuple(self._entries), self._previous_end, self._previous_tokens,
                               self._predicted, self._points, self._writes)

    def restore(self, state: BillingState) -> None:
        assert isinstance(state, BreakpointState)
        self._entries = list(state.entries)
        self._previous_end, self._previous_tokens = state.previous_end, state.previous_tokens
        self._predicted, self._points = state.predicted, state.points
        self._writes = state.writes
