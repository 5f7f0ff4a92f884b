"""Where the masking frontier stands as its replay goes (``frontier``), and
the rules that move it once a turn calls for a move: ``min_free_percent``,
and with a price model ``payback_factor`` and the ledger, which masks only
what the bill can pay for and keeps the rest for good (until a cold
request: the provider writes the whole prompt then anyway)."""

from __future__ import annotations

from obsmask_core.conversation.billing.cache_billing import Forwarded
from obsmask_core.conversation.billing.ledger import CHARS_PER_TOKEN, Ledger, prefix_tokens
from obsmask_core.conversation.frontier.forwarded_requests import ForwardedRequests
from obsmask_core.conversation.frontier.replay_checkpoint import Checkpoint
from obsmask_core.conversation.frontier.turn_savings import TurnSavings
from obsmask_core.conversation.settings.policy import MaskPolicy

# With a price model, how many undecided turns behind the target a move may
# still reach back to (the work per request stays bounded).
LOOKBACK_TURNS = 16


class FrontierMoves:
    """The frontier at some point of the replay: the turn it stands at, and
    per turn before it, masked or kept for good; and the moves it makes."""

    def __init__(self, policy: MaskPolicy, savings: TurnSavings,
                 requests: ForwardedRequests, turns: int) -> None:
        self._policy = policy
        self._savings = savings
        self._requests = requests
        self.turn = 0
        self.request_end = 0  # items in the request at the last move
        # Per turn before the frontier: masked (True) or kept for good.
        self.masked_turns = [False] * turns
        self.masks_something = False
        # What the masked turns before the frontier free, as the ledger counts
        # it, and as it is (characters).
        self.counted_before_frontier = 0
        self.freed_before_frontier = 0
        # Without a price model, turns [self.turn, self.covered) are summed
        # into pending / pending_first.
        self.covered = 0
        self.pending = 0
        self.pending_first: int | None = None
        # This request's first change from the previous forwarded one, while
        # the replay judges it: (item, estimated tokens before it).
        self.changed: tuple[int, int] | None = None

    def restore(self, resume: Checkpoint) -> None:
        self.turn, self.request_end = resume.turn, resume.request_end
        self.counted_before_frontier = resume.counted_before_frontier
        self.covered, self.pending, self.pending_first = (resume.covered, resume.pending,
                                                          resume.pending_first)
        self.masked_turns[:len(resume.masked_turns)] = resume.masked_turns
        self.masks_something = resume.masks_something
        self.freed_before_frontier = sum(self._savings.freed[turn] for turn in range(self.turn)
                                         if self.masked_turns[turn])

    def forwarded(self, end: int) -> Forwarded:
        """The request of ``end`` items as forwarded with the frontier here."""
        return self._requests.forwarded(end, self.counted_before_frontier, self.changed,
                                        self.turn, self.masks_something)

    def _move(self, start: int, target: int, end: int, counted: int) -> None:
        """Mask turns [start, target), keep [self.turn, start) for good."""
        for turn in range(start, target):
            self.masked_turns[turn] = True
            self.freed_before_frontier += self._savings.freed[turn]
            if self._savings.first[turn] is not None:
                self.masks_something = True
        self.turn, self.request_end = target, end
        self.counted_before_frontier += counted

    def _rebilled(self, freed: int, first: int, end: int) -> int:
        """The characters a move freeing ``freed`` makes the provider bill
        again in the request of ``end`` items: everything after its first
        newly masked result (at item ``first``) but what it frees."""
        chars = self._requests.chars_before
        return chars[end] - chars[first] - freed

    def _frees_enough(self, freed: int, rebilled: int) -> bool:
        """``min_free_percent``: a move must free enough of what it re-bills."""
        if not self._policy.min_free_percent:
            return True
        return freed * 100 >= self._policy.min_free_percent * max(rebilled, 1)

    def _pays_back(self, ledger: Ledger, freed: int, rebilled: int) -> bool:
        """``payback_factor``: the reads of what a move frees (``freed``
        characters), one per later request, must pay for re-billing
        ``rebilled`` at the write price within that many times the requests
        made so far."""
        factor = self._policy.payback_factor
        if not factor:
            return True
        model = ledger.model
        return model.read * freed * factor * max(ledger.requests, 1) \
            >= (model.uncached - model.read) * max(rebilled, 1)

    def judge(self, target: int, end: int) -> None:
        """Without a price model: move the frontier over every turn up to
        ``target`` when ``min_free_percent`` allows it, or wait."""
        for turn in range(self.covered, target):
            self.pending += self._savings.freed[turn]
            first = self._savings.first[turn]
            if first is not None and (self.pending_first is None or first < self.pending_first):
                self.pending_first = first
        self.covered = target
        first = self.pending_first
        # (The plain window measures no request: without the rule, no sizes.)
        if first is not None and self._policy.min_free_percent and not self._frees_enough(
                self.pending, self._rebilled(self.pending, first, end)):
            return
        self._move(self.turn, target, end, 0)
        self.pending, self.pending_first = 0, None

    def judge_with_ledger(self, ledger: Ledger, target: int, end: int,
                          plain_cost: int, cold: bool) -> None:
        """With a price model: mask the longest run of the undecided turns
        that ends at ``target`` and that the ledger can pay for (and that
        ``min_free_percent`` and ``payback_factor`` allow); the undecided
        turns before that run are kept for good, and so are those more than
        ``LOOKBACK_TURNS`` behind the target (a result that was not worth
        masking when it left the window is worth less every turn: what
        masking it re-bills only grows). At a ``cold`` request end the provider bills the request
        whole either way: a move re-bills nothing, so ``min_free_percent``
        and ``payback_factor`` (what it frees against what it re-bills)
        hold none back."""
        chars_before, savings = self._requests.chars_before, self._savings
        # A masked request shorter than the provider's smallest cached prompt
        # is read from no cache at all, this time and until it grows again,
        # while the original soon is (if it is not already): no move may
        # take a request there.
        floor = ledger.minimum
        # And none may free so little that a stepped cache could bill a
        # later request past the allowance (``Billing.smallest_saving``).
        smallest = self._smallest_saving(ledger, end)
        # At a cold end nothing is re-billed however far back a move
        # reaches: every undecided turn is judged (cold ends are rare).
        low = self.turn if cold else max(self.turn, target - LOOKBACK_TURNS)
        before = self.counted_before_frontier
        # The floor is held against what masking really frees (the count
        # above never flatters masking, so it would: a request it counts
        # over the minimum may be under it).
        freed_before = self.freed_before_frontier
        freed = counted = 0
        first: int | None = None
        chosen: tuple[int, int, tuple[int, int] | None] | None = None  # start, counted, change
        for start in range(target - 1, low - 1, -1):
            freed += savings.freed[start]
            counted += savings.counted[start]
            turn_first = savings.first[start]
            if turn_first is not None:
                first = turn_first if first is None else min(first, turn_first)
            if first is None:
                chosen = (start, 0, self.changed)  # nothing to mask: free
                continue
            if not cold:
                rebilled = self._rebilled(freed, first, end)
                if not (self._frees_enough(freed, rebilled)
                        and self._pays_back(ledger, freed, rebilled)):
                    continue
            # The forwarded history changes at the first newly masked result.
            changed = self.changed
            if changed is None or first < changed[0]:
                changed = (first, prefix_tokens(chars_before[first] - before, first))
            if prefix_tokens(chars_before[end] - freed_before - freed, end) < floor \
                    or before + counted < smallest:
                continue
            forwarded = self._requests.forwarded(end, before + counted, changed, target, True)
            if ledger.affordable(ledger.masked_cost(forwarded), plain_cost, forwarded):
                chosen = (start, counted, changed)
        if chosen is None:
            self.turn = low
            return
        start, counted, self.changed = chosen
        self._move(start, target, end, counted)

    def reopen_kept(self, ledger: Ledger, end: int, plain_cost: int) -> None:
        """At a cold request end: the turns kept for good before the
        frontier (their masking did not pay on a warm cache) are judged
        again, since the provider writes the whole prompt anyway. The
        newest of them are masked as far back as the provider's minimum and
        the ledger allow (the ledger checks that a move there costs no more
        than the request as sent: it re-bills nothing)."""
        savings, chars_before = self._savings, self._requests.chars_before
        kept = [turn for turn in range(self.turn)
                if not self.masked_turns[turn] and savings.first[turn] is not None]
        if not kept:
            return
        floor, smallest = ledger.minimum, self._smallest_saving(ledger, end)
        before, freed_before = self.counted_before_frontier, self.freed_before_frontier
        freed = counted = 0
        first: int | None = None
        chosen: tuple[int, int, tuple[int, int]] | None = None  # from, counted, change
        for at in range(len(kept) - 1, -1, -1):
            turn = kept[at]
            freed += savings.freed[turn]
            counted += savings.counted[turn]
            turn_first = savings.first[turn]
            assert turn_first is not None
            first = turn_first if first is None else min(first, turn_first)
            if prefix_tokens(chars_before[end] - freed_before - freed, end) < floor:
                break  # reaching further back only frees more
            if before + counted < smallest:
                continue
            changed = self._change_at(first)
            forwarded = self._requests.forwarded(end, before + counted, changed, self.turn, True)
            if ledger.affordable(ledger.masked_cost(forwarded), plain_cost, forwarded):
                chosen = (at, counted, changed)
        if chosen is None:
            return
        at, counted, self.changed = chosen
        for turn in kept[at:]:
            self.masked_turns[turn] = True
            self.freed_before_frontier += savings.freed[turn]
        self.masks_something = True
        self.counted_before_frontier += counted

    def _smallest_saving(self, ledger: Ledger, end: int) -> int:
        """``Ledger.smallest_saving`` at the request of ``end`` items, in
        characters (every later request holds this one)."""
        tokens = prefix_tokens(self._requests.chars_before[end], end)
        return ledger.smallest_saving(tokens) * CHARS_PER_TOKEN

    def _change_at(self, first: int) -> tuple[int, int]:
        """The forwarded history's first change once the result at item
        ``first`` is masked too, with the tokens before it (what the masked
        turns before it free there, not what every masked turn frees)."""
        if self.changed is not None and self.changed[0] <= first:
            return self.changed
        savings = self._savings
        counted = sum(savings.counted[turn] for turn in range(self.turn)
                      if self.masked_turns[turn] and (at := savings.first[turn]) is not None
                      and at < first)
        return first, prefix_tokens(self._requests.chars_before[first] - counted, first)
