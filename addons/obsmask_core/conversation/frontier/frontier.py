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
billed whole. A move there is free: the frontier catches up, and the turns
kept for good on the warm cache are judged again (``reopen_kept``). These come
from outside the request, from a table every request of the conversation
is planned with, so that they all replay the same decisions; without them
(a restart) the replay is the warm one. The provider's brake (``braking``)
comes from that table too: from its request end on, the frontier stays.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from obsmask_core.conversation.billing.ledger import FRAMING_TOKENS, BillSoFar, prefix_tokens
from obsmask_core.conversation.billing.terms import PLAIN_TERMS, BillingTerms
from obsmask_core.conversation.frontier.braking import Brake
from obsmask_core.conversation.frontier.forwarded_requests import ForwardedRequests
from obsmask_core.conversation.frontier.frontier_moves import FrontierMoves
from obsmask_core.conversation.frontier.refetch import CallPlace, RefetchWatch
from obsmask_core.conversation.frontier.replay_checkpoint import Checkpoint, whole_turn_readings
from obsmask_core.conversation.frontier.turn_savings import TurnSavings
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.tool_calls import Call
from obsmask_core.conversation.turns.turn_model import ToolTurnIndex


def estimate_tokens(chars: int, items: int) -> int:
    """A cheap, deterministic estimate of a request's input tokens: its
    items, and the framing of the reply (OpenAI's cookbook: 3)."""
    return prefix_tokens(chars, items) + FRAMING_TOKENS


class Frontier:
    """Where the masking frontier stands for this request.

    The frontier is replayed over the conversation's own history, request
    by request, from the request alone: the request at an earlier turn is a
    prefix of this one, so every request of a conversation finds the same
    frontier for its past (retries, replays and several proxies agree), and
    it only ever moves forward. One pass: what a move would free is summed
    as the candidate target advances, not recounted for each target, and
    the ledger bills each request once. The moves are ``FrontierMoves``';
    the requests as forwarded, for the ledger, ``ForwardedRequests``."""

    def __init__(
        self, index: ToolTurnIndex, items: Sequence[object], policy: MaskPolicy,
        maskable: dict[int, str], resume: Checkpoint | None = None,
        terms: BillingTerms = PLAIN_TERMS,
    ) -> None:
        self._index = index
        self._items = len(items)
        self._policy = policy
        self._maskable = maskable
        self._requests = ForwardedRequests(index, items, policy, terms)
        self.ledger = self._requests.ledger
        self._brake = Brake(terms.braked_from if self.ledger is not None else None)
        self._savings = TurnSavings.of(index, maskable)
        self._results_of: dict[CallPlace, list[int]] | None = None
        # Turns judged so far, and the request end the replay has reached.
        self._judged = self._replayed_to = 0
        # The items as the checkpoint kept for this request holds them.
        self.items_written: bytes | None = None
        # Re-fetches, read answer by answer as the replay goes (from where the resumed
        # replay stood); what the guard keeps leaves what masking may free.
        resumed: Checkpoint | None = None
        readings: tuple[tuple[Call, ...], ...] = ()
        if resume is not None:
            guarded = resume.refetch.guarded_calls if resume.refetch is not None else ()
            self._keep_calls(guarded)
            if self._may_resume(resume):
                resumed = resume
            else:
                if guarded:  # replayed in full: the guard keeps them again as it goes
                    self._maskable = maskable
                    self._savings = TurnSavings.of(index, maskable)
                if resume.refetch is not None:  # the same first items: their calls as read
                    readings = whole_turn_readings(resume, index)
        self._watch = RefetchWatch(index, items, guard=policy.refetch_guard,
                                   state=resumed.refetch if resumed is not None else None,
                                   readings=readings)
        self._requests.measure(resumed)
        self.chars_before = self._requests.chars_before
        self._moves = FrontierMoves(policy, self._savings, self._requests, len(index.turns))
        # Per turn before the frontier: masked (True) or kept for good.
        self._masked_turns = self._moves.masked_turns
        if resumed is not None:
            self._restore(resumed)
        self._replay()

    @property
    def turn(self) -> int:
        """The first tool turn not past the frontier."""
        return self._moves.turn

    @property
    def request_end(self) -> int:
        """Items in the request at the frontier's last move."""
        return self._moves.request_end

    def _may_resume(self, resume: Checkpoint) -> bool:
        """Is ``resume`` a state this replay goes through? Its items must be
        this request's first ones (the caller checked their bytes), end
        where a request of this conversation ends, and the turns it judged
        must have the same savings here."""
        index, end, judged = self._index, resume.items, resume.judged_turns
        if not 0 < end <= self._items or judged > len(index.turns):
            return False
        if resume.layout != self._requests.layout_key():
            return False
        if resume.cold_ends != self._requests.cold_up_to(end) \
                or resume.doubtful_ends != self._requests.doubtful_up_to(end) \
                or resume.braked_from != self._brake.up_to(end):
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

    def _savings_read(self, judged: int) -> int:
        """How many turns' savings the replay has read once it has judged
        ``judged`` turns: a move reaches no further than the window allows
        (``_target``), so a turn still in the window then, which may have
        savings now, played no part."""
        return max(0, judged - self._policy.window_turns)

    def _restore(self, resume: Checkpoint) -> None:
        self._moves.restore(resume)
        if self.ledger is not None and resume.ledger is not None:
            self.ledger.restore(resume.ledger)
        self._judged, self._replayed_to = resume.judged_turns, resume.items

    def checkpoint(self, items_json: bytes, *, closed: bool = True,
                   marks_from: int = -1) -> Checkpoint:
        """Where this replay stands after the whole request, whose items orjson
        wrote as ``items_json`` (without the closing bracket unless ``closed``)."""
        judged, moves = self._judged, self._moves
        used = self._savings_read(judged)
        return Checkpoint(
            items=self._items, items_json=items_json[:-1] if closed else items_json,
            judged_turns=judged,
            chars_before=tuple(self.chars_before),
            freed=tuple(self._savings.freed[:used]),
            counted=tuple(self._savings.counted[:used]),
            first=tuple(self._savings.first[:used]),
            turn=moves.turn, request_end=moves.request_end,
            counted_before_frontier=moves.counted_before_frontier, covered=moves.covered,
            pending=moves.pending, pending_first=moves.pending_first,
            # Only turns before the frontier are marked; it never passes the judged.
            masked_turns=tuple(self._masked_turns[:judged]),
            ledger=self.ledger.state() if self.ledger is not None else None,
            layout=self._requests.layout_key(),
            blocks_before=self._requests.blocks_measured(),
            closing_blocks=tuple(self._requests.closing_blocks),
            masks_something=moves.masks_something,
            cold_ends=self._requests.cold_up_to(self._items),
            doubtful_ends=self._requests.doubtful_up_to(self._items),
            braked_from=self._brake.up_to(self._items),
            refetch=self._watch.state(), marks_from=marks_from,
        )

    def bill(self, predicted: tuple[int, int, int] | None = None) -> BillSoFar | None:
        """The ledger at this request (``Ledger.so_far``; None without a cache)."""
        return self._requests.bill(self._brake.up_to(self._items), predicted)

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
        if turn >= self._moves.turn or not self._masked_turns[turn]:
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
        return turn < self._moves.turn and self._masked_turns[turn]

    def masked_turns(self) -> Sequence[bool]:
        """Per turn before the frontier, ``masks`` (for a loop over every
        result of a request, without a call for each); not to be changed."""
        return self._masked_turns

    def prediction_points(self) -> tuple[int | None, int | None] | None:
        """Where the provider should read this request up to, and write it
        up to, in item boundaries (0: the tools and system alone; None:
        nothing), under Anthropic's cache; None under another."""
        return self._requests.prediction_points()

    def breakpoint_place(self) -> tuple[int, int] | None:
        """The item whose last block takes the frontier breakpoint in this
        request, and that block's number (None: none)."""
        return self._requests.breakpoint_place(self._moves.turn, self._moves.masks_something)

    def _replay(self) -> None:
        index, turns, ledger = self._index, len(self._index.turns), self.ledger
        moves, requests = self._moves, self._requests
        number = self._judged
        # From where the request this one resumes from left off.
        for end in index.request_ends_after(self._replayed_to, self._items):
            # The model's answers before this request end, made seeing the
            # requests as they went out: the replay stands there now.
            if guarded := self._watch.read_up_to(end, self._result_masked):
                self._keep_calls(guarded)
            plain_tokens = plain_cost = 0
            moves.changed, cold = None, end in requests.cold_ends
            # Each turn is judged in the first request that holds it and its
            # results: a prefix of every later request, which all judge it
            # alike (without the system messages it ends with: ``judged_end``).
            judged = requests.judged_end(end)
            if ledger is not None:
                if cold:
                    ledger.expire()
                plain_tokens = prefix_tokens(self.chars_before[judged], judged)
                plain_cost = ledger.plain_cost(plain_tokens, judged)
            while number < turns and index.request_end_after(number, self._items) <= end:
                if (target := self._target(number, end)) is not None:
                    if ledger is None:
                        moves.judge(target, judged)
                    else:
                        moves.judge_with_ledger(ledger, target, judged, plain_cost, cold)
                number += 1
            if ledger is not None:
                if cold and not self._brake.holds(end):
                    moves.reopen_kept(ledger, judged, plain_cost)
                if judged != end:  # billed whole, with the system messages it ends with
                    plain_tokens = prefix_tokens(self.chars_before[end], end)
                    plain_cost = ledger.plain_cost(plain_tokens, end)
                forwarded = moves.forwarded(end)
                ledger.record(plain_tokens, plain_cost, forwarded, None, end,
                              doubtful=end in requests.doubtful_ends)
                ledger.forget_before(requests.lowest_mark(end, moves.turn))
        self._judged, self._replayed_to = number, self._items

    def _target(self, number: int, end: int) -> int | None:
        """Where turn ``number`` would move the frontier; None when it stays."""
        policy = self._policy
        target = max(0, number + 1 - policy.window_turns)
        target -= target % policy.batch_turns
        if target <= self._moves.turn or self._brake.holds(end):
            return None
        tokens = policy.trigger_tokens and estimate_tokens(self.chars_before[end], end)
        return None if tokens and tokens < policy.trigger_tokens else target
