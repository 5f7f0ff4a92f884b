"""What the conversation's previous request lends the plan of the next one.

An agent's next request is its previous one with items added. When the
fast path (``reuse``) proves that, the plan need not redo what it did for
the previous request's items: their writing as orjson writes them (the
frontier's checkpoint compares by it), their results' judgements, and the
conversation's name. The plan made with a hint is the plan made without.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.conversation.planning.holdout import ConversationName
from obsmask_core.conversation.planning.judgements import Judgement


@dataclass(frozen=True)
class PlanHint:
    """``written_open``: orjson's writing of the request's items without the
    closing bracket (None: the planner writes them when it needs them).
    ``judged_before``: the judgements of the first results, by number (None
    for one not judged): the previous request's, whose results these are,
    under the same policy and with no recall to change what an id names.
    ``name``: the conversation's name and holdout bucket, when known;
    ``session``: which run of it, when known, else the first item that
    may hold the model's first answer (``session_from``: the items before
    have none)."""

    written_open: bytes | None = None
    judged_before: Sequence[Judgement | None] = ()
    name: ConversationName | None = None
    session: str | None = None
    session_from: int = 0


NO_HINT = PlanHint()
