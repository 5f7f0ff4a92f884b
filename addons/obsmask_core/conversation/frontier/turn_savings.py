"""What masking the results of each tool turn would free, as the frontier
reads it (``frontier``): as the characters are, and as the ledger counts
them, which never flatters masking."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from obsmask_core.conversation.turns.turn_model import ToolResult, ToolTurnIndex

# Characters a placeholder counts for, in tenths of its length (4 / 2.5).
PLACEHOLDER_WEIGHT_TENTHS = 16
# And what masking frees counts for this percentage of it: the tokens of
# real tool output run sparser than 4 characters a token as often as denser
# (paths, listings), and the ledger must not count savings it may not get.
FREED_PERCENT = 90
_HEAVIER_TENTHS = PLACEHOLDER_WEIGHT_TENTHS - 10


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
        savings._count(index.results, maskable.items())
        return savings

    def recount(self, turns: set[int], index: ToolTurnIndex,
                maskable: dict[int, str]) -> None:
        """Count ``turns`` again from ``maskable`` (results left it)."""
        for turn in turns:
            self.freed[turn] = self.counted[turn] = 0
            self.first[turn] = None
        results = index.results
        self._count(results, ((number, masked_text) for number, masked_text in maskable.items()
                              if results[number].turn in turns))

    def _count(self, results: Sequence[ToolResult],
               maskable: Iterable[tuple[int, str]]) -> None:
        """Add what masking each (number, masked text) result frees. One
        loop, no call per result: every request of a conversation counts
        every maskable result here."""
        freed, counted, first = self.freed, self.counted, self.first
        for number, masked_text in maskable:
            result = results[number]
            turn, position = result.turn, result.location[0]
            frees = len(result.text or "") - len(masked_text)
            freed[turn] += frees
            # A placeholder is ids and numbers, about 2.5 characters a
            # token: counted heavier, so the estimate never flatters masking.
            counted[turn] += (frees - len(masked_text) * _HEAVIER_TENTHS // 10) \
                * FREED_PERCENT // 100
            if (was := first[turn]) is None or position < was:
                first[turn] = position
