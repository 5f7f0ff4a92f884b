"""Where the masking frontier stands: replayed over the request's own history.

Results older than the frontier are masked. The frontier only moves forward,
and the rules that hold it back (``batch_turns``, ``trigger_tokens``,
``min_free_percent``, and the ledger of ``price_model``) are judged on the
conversation as it was at each earlier request, which the current request
holds as a prefix. So every request of a conversation finds the same
frontier for its past, from the request alone: retries, replays and several
proxies agree, with no state.

With a price model that has a cache, the turns the frontier passes are
either masked or kept for good (a result whose masking the bill could not
pay for when it left the window); see ``ledger``. The replay counts the
cache as warm, except at the conversation's cold ends (``last_seen``): the
requests it came back to after the cache's lifetime, which the provider
billed whole. A move there is free, and the frontier catches up. These come
from outside the request, from a table every request of the conversation
is planned with, so that they all replay the same decisions; without them
(a restart) the replay is the warm one.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace

from obsmask_core.conversation.billing.breakpoint_billing import BreakpointBilling
from obsmask_core.conversation.billing.breakpoints import (
    CacheLayout,
    blocks_of,
    closing_block,
    prompt_chars,
)
from obsmask_core.conversation.billing.cache_billing import Billing, Forwarded
from obsmask_core.conversation.billing.ledger import (
    CHARS_PER_TOKEN,
    FRAMING_TOKENS,
    BillSoFar,
    Ledger,
    LedgerState,
    prefix_tokens,
)
from obsmask_core.conversation.billing.prefix_billing import PrefixBilling
from obsmask_core.conversation.billing.price_models import PriceModel, for_format, openai_cache
from obsmask_core.conversation.planning.refetch import CallPlace, RefetchWatch, WatchState
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.tool_calls import Call
from obsmask_core.conversation.turns.turn_model import ToolResult, ToolTurnIndex


def estimate_tokens(chars: int, items: int) -> int:
    """A cheap, deterministic estimate of a request's input tokens: its
    items, and the framing of the reply (OpenAI's cookbook: 3)."""
    return prefix_tokens(chars, items) + FRAMING_TOKENS


# Characters a placeholder counts for, in tenths of its length (4 / 2.5).
PLACEHOLDER_WEIGHT_TENTHS = 16
# And what masking frees counts for this percentage of it: the tokens of
# real tool output run sparser than 4 characters a token as often as denser
# (paths, listings), and the ledger must not count savings it may not get.
FREED_PERCENT = 90
# With a price model, how many undecided turns behind the target a move may
# still reach back to (the work per request stays bounded).
LOOKBACK_TURNS = 16


@dataclass
class TurnSavings:
    """Per turn: the characters its maskable results would free, as they
    are (``freed``) and as the ledger counts them (``counted``), and the
    position of the first of them."""

    freed: list[int]
    counted: list[int]
    first: list[int | None]

    @classmethod
    def of(cls, index: ToolTurnIndex, maskable: dict[int, str]) -> TurnSavings:
        turns = len(index.turns)
        savings = cls([0] * turns, [0] * turns, [None] * turns)
        for number, masked_text in maskable.items():
            savings._add(index.results[number], masked_text)
        return savings

    def _add(self, result: ToolResult, masked_text: str) -> None:
        freed = len(result.text or "") - len(masked_text)
        self.freed[result.turn] += freed
        # A placeholder is ids and numbers, about 2.5 characters a token:
        # counted heavier, so the estimate never flatters masking.
        heavier = len(masked_text) * (PLACEHOLDER_WEIGHT_TENTHS - 10) // 10
        self.counted[result.turn] += (freed - heavier) * FREED_PERCENT // 100
        position = result.location[0]
        first = self.first[result.turn]
        self.first[result.turn] = position if first is None else min(first, position)

    def recount(self, turns: set[int], index: ToolTurnIndex,
                maskable: dict[int, str]) -> None:
        """Count ``turns`` again from ``maskable`` (results left it)."""
        for turn in turns:
            self.freed[turn] = self.counted[turn] = 0
            self.first[turn] = None
        for number, masked_text in maskable.items():
            if (result := index.results[number]).turn in turns:
                self._add(result, masked_text)


def _request_ends(index: ToolTurnIndex, items: int) -> list[int]:
    """Where each request of the conversation ended: just before each of the
    model's answers, and this request at the end of the list."""
    ends = [start for start in index.answer_starts if 0 < start < items]
    ends.append(items)
    return ends


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where a replay stood once it had replayed a whole request of
    ``items`` items: the next request of the conversation holds that one
    as a prefix, so its replay, which would go through the same steps,
    can start here instead (``Frontier(resume=...)`` checks that it may).

    ``items_json`` is orjson's writing of those items without the closing
    bracket: what the next request's items must begin with, byte for
    byte, to be the same items (``same_items``)."""

    items: int
    items_json: bytes
    judged_turns: int
    chars_before: tuple[int, ...]
    # The savings the replay read (``Frontier._savings_read``): a later
    # request may judge an old result differently (with recall, an id
    # another result reuses), and then replays in full.
    freed: tuple[int, ...]
    counted: tuple[int, ...]
    first: tuple[int | None, ...]
    turn: int
    request_end: int
    counted_before_frontier: int
    covered: int
    pending: int
    pending_first: int | None
    masked_turns: tuple[bool, ...]
    ledger: LedgerState | None
    # The Anthropic request's breakpoints the replay ran under
    # (``CacheLayout.key``), and the blocks before each item it measured.
    layout: tuple[object, ...] | None = None
    blocks_before: tuple[int, ...] = ()
    masks_something: bool = False
    # The cold ends among its items the replay billed as cold: a replay
    # that has others there goes through other states.
    cold_ends: frozenset[int] = frozenset()
    # The calls the replay read, for re-fetches (``refetch``).
    refetch: WatchState | None = None

    def same_items(self, items_json: bytes) -> bool:
        """Do ``items_json`` (all of a request's items) begin with this
        checkpoint's items? A JSON value never ends inside another one
        followed by a comma or the closing bracket."""
        if not items_json.startswith(self.items_json):
            return False
        following = items_json[len(self.items_json):len(self.items_json) + 1]
        # Nothing follows in a writing without its closing bracket.
        return following in (b",", b"]", b"")


class Frontier:
    """Where the masking frontier stands for this request.

    The frontier is replayed over the conversation's own history, request
    by request, from the request alone: the request at an earlier turn is a
    prefix of this one, so every request of a conversation finds the same
    frontier for its past (retries, replays and several proxies agree), and
    it only ever moves forward. One pass: what a move would free is summed
    as the candidate target advances, not recounted for each target, and
    the ledger bills each request once.
    """

    def __init__(
        self,
        index: ToolTurnIndex,
        items: Sequence[object],
        policy: MaskPolicy,
        maskable: dict[int, str],
        resume: Checkpoint | None = None,
        layout: CacheLayout | None = None,
        cold_ends: frozenset[int] = frozenset(),
    ) -> None:
        self.turn = 0
        self.request_end = 0  # items in the request at the last move
        self._layout = layout
        # blocks_before[i]: the blocks of the items before item i, for the
        # lookback of Anthropic's cache (measured only under it).
        self.blocks_before = [0]
        self.ledger = _ledger(policy, layout, self.blocks_before)
        # The request ends (items) the conversation came back to after the
        # cache's lifetime; without a ledger every move is free anyway.
        self._cold_ends = cold_ends if self.ledger is not None else frozenset()
        # The forwarded requests carry the frontier breakpoint once something
        # is masked: where the client marks its request's end and leaves a
        # slot free (``breakpoints``).
        self._marks_frontier = (policy.frontier_breakpoint and layout is not None
                                and layout.marks_end and layout.free_slot)
        self._masks_something = False
        # This request's first change from the previous forwarded one, while
        # the replay judges it: (item, estimated tokens before it).
        self._changed: tuple[int, int] | None = None
        self._index = index
        self._item_list = items
        self._items = len(items)
        self._policy = policy
        self._maskable = maskable
        self._savings = TurnSavings.of(index, maskable)
        self._results_of: dict[CallPlace, list[int]] | None = None
        # What the masked turns before the frontier free, as the ledger counts it.
        self._counted_before_frontier = 0
        # Without a price model, turns [self.turn, self._covered) are summed
        # into _pending / _first.
        self._covered = 0
        self._pending = 0
        self._first: int | None = None
        # Per turn before the frontier: masked (True) or kept for good.
        self._masked_turns = [False] * len(index.turns)
        # Turns judged so far, and the request end the replay has reached.
        self._judged = 0
        self._replayed_to = 0
        # The items as the checkpoint kept for this request holds them.
        self.items_written: bytes | None = None
        # Re-fetches, read answer by answer as the replay goes (from where the
        # resumed replay stood); the results the guard keeps leave what
        # masking may free (``_keep_calls``).
        watched: WatchState | None = None
        readings: tuple[tuple[Call, ...], ...] = ()
        if resume is not None:
            guarded = resume.refetch.guarded_calls if resume.refetch is not None else ()
            self._keep_calls(guarded)
            if self._may_resume(resume):
                self._restore(resume)
                watched = resume.refetch
            else:
                if guarded:  # replayed in full: the guard keeps them again as it goes
                    self._maskable = maskable
                    self._savings = TurnSavings.of(index, maskable)
                if resume.refetch is not None:  # the same first items: their calls as read
                    readings = _complete(resume, index)
        self._watch = RefetchWatch(index, items, guard=policy.refetch_guard, state=watched,
                                   readings=readings)
        # chars_before[i]: characters of the items before item i. Only the
        # rules that measure the request need it; the plain window does not.
        measures = (policy.trigger_tokens or policy.min_free_percent
                    or policy.max_input_tokens or self.ledger)
        self.chars_before = [0]
        if measures:
            if self._replayed_to:
                assert resume is not None
                self.chars_before = list(resume.chars_before)
            total = self.chars_before[-1]
            for item in items[len(self.chars_before) - 1:]:
                total += prompt_chars(item)
                self.chars_before.append(total)
        if self.ledger is not None and isinstance(self.ledger.billing, BreakpointBilling):
            if self._replayed_to:
                assert resume is not None
                self.blocks_before[:] = resume.blocks_before
            blocks = self.blocks_before[-1]
            for item in items[len(self.blocks_before) - 1:]:
                blocks += blocks_of(item)
                self.blocks_before.append(blocks)
        self._replay()

    def _may_resume(self, resume: Checkpoint) -> bool:
        """Is ``resume`` a state this replay goes through? Its items must be
        this request's first ones (the caller checked their bytes), end
        where a request of this conversation ends, and the turns it judged
        must have the same savings here."""
        index, end, judged = self._index, resume.items, resume.judged_turns
        if not 0 < end <= self._items or judged > len(index.turns):
            return False
        if resume.layout != (self._layout.key() if self._layout is not None else None):
            return False
        if resume.cold_ends != self._cold_up_to(end):
            return False
        at = bisect.bisect_left(index.answer_starts, end)
        if end < self._items and (at == len(index.answer_starts)
                                  or index.answer_starts[at] != end):
            return False
        # The turns judged by then are those whose first request ends there.
        if judged and index.request_end_after(judged - 1, self._items) > end:
            return False
        if judged < len(index.turns) and index.request_end_after(judged, self._items) <= end:
            return False
        savings, used = self._savings, self._savings_read(judged)
        return (tuple(savings.freed[:used]) == resume.freed
                and tuple(savings.counted[:used]) == resume.counted
                and tuple(savings.first[:used]) == resume.first)

    def _cold_up_to(self, items: int) -> frozenset[int]:
        """The cold ends a replay of the first ``items`` items bills at."""
        return frozenset(end for end in self._cold_ends if end <= items)

    def _savings_read(self, judged: int) -> int:
        """How many turns' savings the replay has read once it has judged
        ``judged`` turns: a move reaches no further than the window allows
        (``_target``), so a turn still in the window then, which may have
        savings now, played no part."""
        return max(0, judged - self._policy.window_turns)

    def _restore(self, resume: Checkpoint) -> None:
        self.turn, self.request_end = resume.turn, resume.request_end
        self._counted_before_frontier = resume.counted_before_frontier
        self._covered, self._pending, self._first = (resume.covered, resume.pending,
                                                     resume.pending_first)
        self._masked_turns[:len(resume.masked_turns)] = resume.masked_turns
        if self.ledger is not None and resume.ledger is not None:
            self.ledger.restore(resume.ledger)
        self._judged, self._replayed_to = resume.judged_turns, resume.items
        self._masks_something = resume.masks_something

    def checkpoint(self, items_json: bytes, *, closed: bool = True) -> Checkpoint:
        """Where this replay stands now that it has replayed the whole
        request, whose items orjson wrote as ``items_json`` (without the
        closing bracket when not ``closed``)."""
        judged = self._judged
        used = self._savings_read(judged)
        return Checkpoint(
            items=self._items, items_json=items_json[:-1] if closed else items_json,
            judged_turns=judged,
            chars_before=tuple(self.chars_before),
            freed=tuple(self._savings.freed[:used]),
            counted=tuple(self._savings.counted[:used]),
            first=tuple(self._savings.first[:used]),
            turn=self.turn, request_end=self.request_end,
            counted_before_frontier=self._counted_before_frontier, covered=self._covered,
            pending=self._pending, pending_first=self._first,
            # Only turns before the frontier are ever marked, and it never
            # passes the turns judged.
            masked_turns=tuple(self._masked_turns[:judged]),
            ledger=self.ledger.state() if self.ledger is not None else None,
            layout=self._layout.key() if self._layout is not None else None,
            blocks_before=tuple(self.blocks_before) if len(self.blocks_before) > 1 else (),
            masks_something=self._masks_something,
            cold_ends=self._cold_up_to(self._items),
            refetch=self._watch.state(),
        )

    def bill(self) -> BillSoFar | None:
        """The ledger at this request (None without a price model with a cache)."""
        if self.ledger is None:
            return None
        if not self._cold_ends:
            return self.ledger.so_far()
        ends = set(_request_ends(self._index, self._items))
        return replace(self.ledger.so_far(),
                       cold_ends=tuple(sorted(self._cold_ends & ends)))

    @property
    def watch(self) -> RefetchWatch:
        """The re-fetches found in the request, and the calls the guard keeps."""
        return self._watch

    def guarded_results(self) -> set[int]:
        """The numbers of the results the guard keeps (``refetched``)."""
        places = self._watch.guarded_calls
        if not places:
            return set()
        return {number for place in places for number in self._results_by_call().get(place, ())}

    def _results_by_call(self) -> dict[CallPlace, list[int]]:
        if self._results_of is None:
            self._results_of = {}
            for number, result in enumerate(self._index.results):
                self._results_of.setdefault((result.turn, result.call_id), []).append(number)
        return self._results_of

    def _result_masked(self, turn: int, call_id: str) -> bool:
        """Is the result of that call masked in the request as it goes out
        now? Its turn is past the frontier and masked, and masking may
        replace the result (no rule of its own keeps it)."""
        if turn >= self.turn or not self._masked_turns[turn]:
            return False
        return any(number in self._maskable
                   for number in self._results_by_call().get((turn, call_id), ()))

    def _keep_calls(self, places: Sequence[CallPlace] | frozenset[CallPlace]) -> None:
        """The results of these calls leave what masking may free: the guard
        keeps them. Read before any move looks at their turns (a call's
        results come after the answer that made it)."""
        numbers = [number for place in places
                   for number in self._results_by_call().get(place, ())
                   if number in self._maskable]
        if not numbers:
            return
        leaving = set(numbers)
        self._maskable = {number: text for number, text in self._maskable.items()
                          if number not in leaving}
        self._savings.recount({self._index.results[number].turn for number in numbers},
                              self._index, self._maskable)

    def masks(self, turn: int) -> bool:
        """Are the results of ``turn`` past the frontier and masked?"""
        return turn < self.turn and self._masked_turns[turn]

    def masked_turns(self) -> Sequence[bool]:
        """Per turn before the frontier, ``masks`` (for a loop over every
        result of a request, without a call for each); not to be changed."""
        return self._masked_turns

    def prediction_points(self) -> tuple[int | None, int | None] | None:
        """Where the provider should read this request up to, and write it
        up to, in item boundaries (0: the tools and system alone; None:
        nothing), under Anthropic's cache; None under another."""
        if self.ledger is None or not isinstance(self.ledger.billing, BreakpointBilling):
            return None
        return self.ledger.billing.prediction_points()

    def breakpoint_item(self) -> int | None:
        """The item whose last block takes the frontier breakpoint in this
        request (None: none)."""
        mark = self._mark(self.turn, self._masks_something, self._items)
        return mark - 1 if mark is not None else None

    def _mark(self, turn: int, masks_something: bool, end: int) -> int | None:
        """The item boundary the frontier breakpoint closes in a forwarded
        request of ``end`` items whose frontier is at ``turn``: just before
        that turn's results, after its call (everything before is decided).
        None: no breakpoint (nothing masked yet, or no block to put it on)."""
        if not self._marks_frontier or not masks_something or turn >= len(self._index.turns):
            return None
        item = self._index.turns[turn].last
        if item + 1 >= end or closing_block(self._item_list[item]) is None:
            return None
        return item + 1

    def _forwarded(self, end: int, counted: int, changed: tuple[int, int] | None,
                   turn: int, masks_something: bool) -> Forwarded:
        """The request of ``end`` items as forwarded with ``counted`` freed
        before the frontier at ``turn``, changed first at ``changed``."""
        chars = self.chars_before
        changed_at, before = changed if changed is not None else (None, 0)
        mark = self._mark(turn, masks_something, end)
        return Forwarded(
            end, prefix_tokens(chars[end] - counted, end), changed_at, before, mark,
            prefix_tokens(chars[mark] - counted, mark) if mark is not None else 0)

    def _replay(self) -> None:
        index, turns, ledger = self._index, len(self._index.turns), self.ledger
        number = self._judged
        for end in _request_ends(index, self._items):
            if end <= self._replayed_to:
                continue  # replayed by the request this one resumes from
            # The model's answers before this request end, made seeing the
            # requests as they went out: the replay stands there now.
            if guarded := self._watch.read_up_to(end, self._result_masked):
                self._keep_calls(guarded)
            plain_tokens = plain_cost = 0
            self._changed = None
            cold = end in self._cold_ends
            if ledger is not None:
                if cold:
                    ledger.expire()
                plain_tokens = prefix_tokens(self.chars_before[end], end)
                plain_cost = ledger.plain_cost(plain_tokens, end)
            # Each turn is judged in the first request that holds it and its
            # results: a prefix of every later request, which all judge it alike.
            while number < turns and index.request_end_after(number, self._items) <= end:
                if ledger is None:
                    self._judge(number, end)
                else:
                    self._judge_with_ledger(ledger, number, end, plain_cost, cold)
                number += 1
            if ledger is not None:
                forwarded = self._forwarded(end, self._counted_before_frontier, self._changed,
                                            self.turn, self._masks_something)
                ledger.record(plain_tokens, plain_cost, forwarded,
                              ledger.masked_cost(forwarded), end)
                ledger.billing.forget_before(self._lowest_mark(end))
        self._judged, self._replayed_to = number, self._items

    def _lowest_mark(self, end: int) -> int:
        """The earliest item boundary a later request's breakpoint may
        close: its end, or the frontier's (which only moves forward)."""
        turns = self._index.turns
        if self._marks_frontier and self.turn < len(turns):
            return min(end, turns[self.turn].last + 1)
        return end

    def _target(self, number: int, end: int) -> int | None:
        """Where turn ``number`` would move the frontier; None when it stays."""
        policy = self._policy
        target = max(0, number + 1 - policy.window_turns)
        target -= target % policy.batch_turns
        if target <= self.turn:
            return None
        if (
            policy.trigger_tokens
            and estimate_tokens(self.chars_before[end], end) < policy.trigger_tokens
        ):
            return None
        return target

    def _move(self, start: int, target: int, end: int, counted: int) -> None:
        """Mask turns [start, target), keep [self.turn, start) for good."""
        for turn in range(start, target):
            self._masked_turns[turn] = True
            if self._savings.first[turn] is not None:
                self._masks_something = True
        self.turn, self.request_end = target, end
        self._counted_before_frontier += counted

    def _frees_enough(self, freed: int, first: int, end: int) -> bool:
        """``min_free_percent``: a move re-bills everything after its first
        newly masked result (at item ``first``); it must free enough of that."""
        if not self._policy.min_free_percent:
            return True
        rebilled = self.chars_before[end] - self.chars_before[first] - freed
        return freed * 100 >= self._policy.min_free_percent * max(rebilled, 1)

    def _judge(self, number: int, end: int) -> None:
        """Without a price model: move the frontier over every turn up to
        the target when ``min_free_percent`` allows it, or wait."""
        if (target := self._target(number, end)) is None:
            return
        for turn in range(self._covered, target):
            self._pending += self._savings.freed[turn]
            first = self._savings.first[turn]
            if first is not None and (self._first is None or first < self._first):
                self._first = first
        self._covered = target
        first = self._first
        if first is not None and not self._frees_enough(self._pending, first, end):
            return
        self._move(self.turn, target, end, 0)
        self._pending, self._first = 0, None

    def _judge_with_ledger(self, ledger: Ledger, number: int, end: int,
                           plain_cost: int, cold: bool) -> None:
        """With a price model: mask the longest run of the undecided turns
        that ends at the target and that the ledger can pay for (and that
        ``min_free_percent`` allows); the undecided turns before that run
        are kept for good, and so are those more than ``LOOKBACK_TURNS``
        behind the target (a result that was not worth masking when it left
        the window is worth less every turn: what masking it re-bills only
        grows). At a ``cold`` request end the provider bills the request
        whole either way: a move re-bills nothing, so ``min_free_percent``
        (what it frees against what it re-bills) holds none back."""
        if (target := self._target(number, end)) is None:
            return
        # A masked request shorter than the provider's smallest cached prompt
        # is read from no cache at all, this time and until it grows again,
        # while the original soon is (if it is not already): no move may
        # take a request there.
        floor = ledger.minimum
        # And none may free so little that a stepped cache could bill a
        # later request more than the original (``Billing.smallest_saving``).
        smallest = ledger.billing.smallest_saving * CHARS_PER_TOKEN
        low = max(self.turn, target - LOOKBACK_TURNS)
        before = self._counted_before_frontier
        freed = counted = 0
        first: int | None = None
        chosen: tuple[int, int, tuple[int, int] | None] | None = None  # start, counted, change
        for start in range(target - 1, low - 1, -1):
            freed += self._savings.freed[start]
            counted += self._savings.counted[start]
            turn_first = self._savings.first[start]
            if turn_first is not None:
                first = turn_first if first is None else min(first, turn_first)
            if first is None:
                chosen = (start, 0, self._changed)  # nothing to mask: free
                continue
            if not cold and not self._frees_enough(freed, first, end):
                continue
            # The forwarded history changes at the first newly masked result.
            changed = self._changed
            if changed is None or first < changed[0]:
                changed = (first, prefix_tokens(self.chars_before[first] - before, first))
            if prefix_tokens(self.chars_before[end] - before - counted, end) < floor \
                    or before + counted < smallest:
                continue
            cost = ledger.masked_cost(self._forwarded(end, before + counted, changed, target,
                                                      True))
            if ledger.affordable(cost, plain_cost):
                chosen = (start, counted, changed)
        if chosen is None:
            self.turn = low
            return
        start, counted, self._changed = chosen
        self._move(start, target, end, counted)


def _complete(resume: Checkpoint, index: ToolTurnIndex) -> tuple[tuple[Call, ...], ...]:
    """The calls the checkpoint's replay read, of the turns that were
    whole in its request (an item followed each: a run of Responses calls
    can go on in a later request)."""
    assert resume.refetch is not None
    readings, turns = resume.refetch.readings, index.turns
    whole = 0
    while whole < min(len(readings), len(turns)) and turns[whole].last + 1 < resume.items:
        whole += 1
    return readings[:whole]


def _ledger(policy: MaskPolicy, layout: CacheLayout | None,
            blocks_before: Sequence[int]) -> Ledger | None:
    """The ledger of ``policy``'s price model under the provider's cache:
    Anthropic's breakpoints when the request is an Anthropic one whose
    client marks its end (or marks no message at all: nothing among the
    messages is cached then), else OpenAI's automatic prefix cache (Chat
    Completions and Responses). An Anthropic client whose breakpoints stay
    fixed among the messages is billed under the longest common prefix."""
    model: PriceModel = for_format(policy.price_model, layout is not None)
    if not model.has_cache:
        return None
    billing: Billing
    if layout is None:
        billing = PrefixBilling(openai_cache(model))
    elif layout.marks_end or not layout.in_messages:
        billing = BreakpointBilling(model, layout, blocks_before)
    else:
        billing = PrefixBilling(model)
    return Ledger(model, policy.allowance_percent, billing)
