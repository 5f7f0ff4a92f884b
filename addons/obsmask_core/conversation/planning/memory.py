"""What planning keeps between requests under one policy: the judgements of
results seen before and the frontier's checkpoints.

Both only save work: a plan made with them is the plan made without them
(a judgement depends on the result and the policy alone; a checkpoint is
used only where a full replay would reach the same state). The masker
(``masking.masker``) holds one per policy; a plan made with none judges
every result afresh and replays the frontier in full.
"""

from __future__ import annotations

from collections.abc import Hashable

from obsmask_core.conversation.frontier.checkpoints import Checkpoints
from obsmask_core.conversation.planning.judgements import Judgement

# An agent sends the same old results again every turn: they are judged
# once per policy, by call id, tool, error flag, whether a recall can name
# them, and the text's hash and length (not the text itself). Two texts that
# share all of these are about 1 in 2**64. The masked text kept holds the
# result's preserved blocks, so an entry can weigh a few KB: this many are
# kept, then the table starts again.
JUDGEMENTS_KEPT = 20_000

# A result's judgement is looked up by these (``JudgementKey.of``).
JudgementKey = Hashable


class Judgements:
    """The judgements of results seen before, bounded in number. Shared by
    the event loop and the worker thread without a lock: each lookup, store
    and clear is one dict operation, and two threads that judge the same
    result store the same judgement."""

    def __init__(self, kept: int = JUDGEMENTS_KEPT) -> None:
        self._kept = kept
        self._table: dict[JudgementKey, Judgement] = {}

    def get(self, key: JudgementKey) -> Judgement | None:
        return self._table.get(key)

    def put(self, key: JudgementKey, judgement: Judgement) -> None:
        if len(self._table) >= self._kept:
            self._table.clear()
        self._table[key] = judgement

    def clear(self) -> None:
        self._table.clear()


class PlanMemory:
    """The judgements and the frontier's checkpoints of one policy."""

    def __init__(self, judgements: Judgements | None = None,
                 checkpoints: Checkpoints | None = None) -> None:
        self.judgements = judgements if judgements is not None else Judgements()
        self.checkpoints = checkpoints if checkpoints is not None else Checkpoints()

    def clear(self) -> None:
        """Judge every result afresh and replay every frontier in full."""
        self.judgements.clear()
        self.checkpoints.clear()
