"""What the planner decides for one request: a decision per result it
rewrites, and why each other result stays."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from obsmask_core.conversation.billing.breakpoints import AddedBreakpoint
from obsmask_core.conversation.billing.ledger import BillSoFar
from obsmask_core.conversation.planning.holdout import ConversationName
from obsmask_core.conversation.planning.judgements import Judgement, KeptReason
from obsmask_core.conversation.turns.turn_model import Location
from obsmask_core.shared.refetch_facts import RefetchFacts

DecisionKind = Literal["masked", "clipped", "recalled"]
MASKED: DecisionKind = "masked"
CLIPPED: DecisionKind = "clipped"
# A recall stub replaced by the text it asks for (``recall``).
RECALLED: DecisionKind = "recalled"
# The reduction stage a request reached: nothing, masking old results, or
# clipping recent ones as well.
Stage = Literal["none", "masking", "clipping"]



class MaskDecision(NamedTuple):
    """One tool result to rewrite: where, what it was, and what it becomes
    (the placeholder when ``kind`` is "masked", a clipped text when
    "clipped", the recalled text when "recalled"). A named tuple, like the
    turn model's values: one is made per masked result of every request."""

    location: Location
    call_id: str
    tool_name: str | None
    original: str  # the text that goes
    original_value: object  # the value as found (a string or a list of blocks)
    new_text: str
    kind: DecisionKind = MASKED


@dataclass
class MaskPlan:
    """The decisions for one request, and why the other results were kept."""

    decisions: list[MaskDecision] = field(default_factory=list)
    tool_turns: int = 0
    tool_results: int = 0
    # Tool turns before this one are past the masking frontier.
    frontier_turn: int = 0
    stage: Stage = "none"
    kept: Counter[KeptReason] = field(default_factory=Counter)
    # Why each kept result was kept, by its location (orphans included):
    # ``kept`` counts these. A result kept by the first stage and then
    # clipped by the second is in both (its decision says "clipped").
    kept_at: dict[Location, KeptReason] = field(default_factory=dict)
    # The bill so far (None when the price model has no cache, or nothing
    # was planned); True when the conversation is in the holdout group.
    bill: BillSoFar | None = None
    held_out: bool = False
    # The conversation's name (holdout.conversation_id): totals group by it.
    # ``name`` holds it with its holdout bucket.
    conversation: str | None = None
    # Which run of the conversation (holdout.session_id): the totals add
    # up the bill of each.
    session: str | None = None
    name: ConversationName | None = field(default=None, repr=False, compare=False)
    # orjson's writing of the items without the closing bracket, as the
    # frontier's checkpoint keeps it (None when none was kept): the next
    # request that grew from this one writes its own from it.
    items_written: bytes | None = field(default=None, repr=False, compare=False)
    # Each result's judgement, by number (None: inside the window, not
    # judged): the next request of the conversation starts from these.
    judgements: list[Judgement | None] = field(default_factory=list, repr=False,
                                               compare=False)
    # The frontier breakpoint the request goes out with (Anthropic), if any.
    breakpoint: AddedBreakpoint | None = None
    # Calls the model made again once masking took their result (``refetch``).
    refetches: RefetchFacts = field(default_factory=RefetchFacts)

    @property
    def masked(self) -> int:
        return sum(1 for d in self.decisions if d.kind == MASKED)

    @property
    def clipped(self) -> int:
        return sum(1 for d in self.decisions if d.kind == CLIPPED)

    @property
    def recalled(self) -> int:
        return sum(1 for d in self.decisions if d.kind == RECALLED)
