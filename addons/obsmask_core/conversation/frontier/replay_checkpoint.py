"""The record of where a frontier's replay stood after a whole request
(``frontier``), from which the next request of the conversation may resume
its own replay; ``checkpoints`` keeps them between requests."""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.conversation.billing.ledger import LedgerState
from obsmask_core.conversation.billing.unmarked import CACHE_CONTROL_WRITTEN
from obsmask_core.conversation.frontier.refetch import WatchState
from obsmask_core.conversation.turns.tool_calls import Call
from obsmask_core.conversation.turns.turn_model import ToolTurnIndex


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
    # Each item's block the frontier breakpoint would go on (-1: none), when
    # the replay placed one (``ForwardedRequests.closing_blocks``).
    closing_blocks: tuple[int, ...] = ()
    masks_something: bool = False
    # The cold ends among its items the replay billed as cold: a replay
    # that has others there goes through other states.
    cold_ends: frozenset[int] = frozenset()
    # And the doubtful ends it met (``last_seen``), for the same reason.
    doubtful_ends: frozenset[int] = frozenset()
    # The provider's brake, where the replay met it (``braked_up_to``).
    braked_from: int | None = None
    # The calls the replay read, for re-fetches (``refetch``).
    refetch: WatchState | None = None
    # Where ``items_json`` first names a ``cache_control`` member (its
    # length: nowhere), as ``marks_from`` finds it (-1: not looked for).
    marks_from: int = -1

    def same_items(self, items_json: bytes) -> bool:
        """Do ``items_json`` (all of a request's items) begin with this
        checkpoint's items? A JSON value never ends inside another one
        followed by a comma or the closing bracket."""
        if not items_json.startswith(self.items_json):
            return False
        following = items_json[len(self.items_json):len(self.items_json) + 1]
        # Nothing follows in a writing without its closing bracket.
        return following in (b",", b"]", b"")


def whole_turn_readings(resume: Checkpoint,
                        index: ToolTurnIndex) -> tuple[tuple[Call, ...], ...]:
    """The calls the checkpoint's replay read, of the turns that were
    whole in its request (an item followed each: a run of Responses calls
    can go on in a later request)."""
    assert resume.refetch is not None
    readings, turns = resume.refetch.readings, index.turns
    whole = 0
    while whole < min(len(readings), len(turns)) and turns[whole].last + 1 < resume.items:
        whole += 1
    return readings[:whole]


def marks_from(written: bytes, items_end: int, resume: Checkpoint | None) -> int:
    """Where orjson's writing of a request's items (``written`` up to
    ``items_end``, without the closing bracket) first names a
    ``cache_control`` member, or ``items_end`` when it names none (orjson
    writes every name alike; an unmarked writing holds only the members
    whose value is not a flat object: ``unmarked``). It begins with the
    bytes of ``resume``, when given, which are not searched again when its
    replay searched them: a conversation's writing is searched as it
    grows, not whole on every request."""
    start = 0
    if resume is not None and resume.marks_from >= 0:
        if resume.marks_from < len(resume.items_json):
            return resume.marks_from
        start = max(0, len(resume.items_json) - len(CACHE_CONTROL_WRITTEN) + 1)
    found = written.find(CACHE_CONTROL_WRITTEN, start, items_end)
    return found if found >= 0 else items_end
