"""Re-fetches: calls the model made again because masking took the result.

Masking trades tokens for turns when the model needs a masked result: it
runs the same call again. A call is a re-fetch when an earlier call of the
conversation was the same one (``tool_calls``: same tool, same arguments as
JSON), that earlier call's result was masked in the request the model
answered with the new call, and no call in between may have changed what it
reads. Agents also repeat calls on their own (``git status``, the tests
after an edit): a repeat after a possible change, or of a call whose result
the model still had, is counted apart and is not a re-fetch.

Read from the request alone, answer by answer, as the frontier replays the
conversation (``frontier``): the state masking was in when the model made
each call is the replay's, so every request and every proxy finds the same
re-fetches. With the guard on, the results of a re-fetched call and of
every later call that is the same are kept (``refetched``): from the first
request that holds them, so nothing masked is ever restored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from obsmask_core.conversation.billing.ledger import CHARS_PER_TOKEN
from obsmask_core.conversation.turns.tool_calls import Call, calls_of
from obsmask_core.conversation.turns.turn_model import ToolTurnIndex
from obsmask_core.shared.refetch_facts import UNKNOWN_TOOL, RefetchFacts

# A call's place: (turn number, call id). Ids alone are not unique: some
# clients reuse call_0 in every turn.
CallPlace = tuple[int, str]


@dataclass(frozen=True, slots=True)
class Refetch:
    """A call the model made again after the earlier one's result was masked."""

    call_id: str
    tool_name: str | None
    turn: int
    # The item where the model's answer holding the call begins: the
    # request it answered had this many items.
    answer: int
    earlier_call_id: str
    earlier_turn: int


# The latest call with a given key: when it came (its sequence number),
# and where it is (its turn and id). A plain tuple, as ``Call`` is: every
# checkpoint keeps one per key.
_Seen = tuple[int, int, str]


@dataclass(frozen=True, slots=True)
class WatchState:
    """Where a watch stood once it had read the calls of ``turns_read``
    turns: a frontier checkpoint keeps it for the next request."""

    turns_read: int = 0
    calls: int = 0
    # The sequence number of the latest call that may change something.
    last_change: int = -1
    # The latest call of each key. Copied whole when a checkpoint is taken,
    # and never changed after: a dict, not a tuple of pairs (one object,
    # where pairs were as many new objects as calls, every request).
    seen: Mapping[bytes, _Seen] = field(default_factory=dict)
    guarded_keys: frozenset[bytes] = frozenset()
    guarded_calls: frozenset[CallPlace] = frozenset()
    refetches: tuple[Refetch, ...] = ()
    # Repeats that are not re-fetches: the model still had the earlier
    # result, or a call in between may have changed what it reads.
    repeats_seen: int = 0
    repeats_after_change: int = 0
    # The calls of each turn read so far, as read: they depend on the items
    # alone, so a replay of the same items that cannot resume from this
    # state (another layout, other savings) reads them from here.
    readings: tuple[tuple[Call, ...], ...] = ()


class RefetchWatch:
    """Reads a request's calls answer by answer, in step with the frontier's
    replay, and finds the re-fetches among them."""

    def __init__(self, index: ToolTurnIndex, items: Sequence[object], *, guard: bool,
                 state: WatchState | None = None,
                 readings: tuple[tuple[Call, ...], ...] = ()) -> None:
        """``state``: where an earlier replay of these items' first ones
        stood, to go on from; ``readings``: the calls such a replay read,
        when it cannot go on from its state."""
        self._turns = index.turns
        self._items = items
        self._guard = guard
        state = state or WatchState()
        self._readings = list(state.readings or readings)
        self._turns_read = state.turns_read
        self._calls = state.calls
        self._last_change = state.last_change
        self._seen = dict(state.seen)
        self._guarded_keys = set(state.guarded_keys)
        self._guarded_calls = set(state.guarded_calls)
        self._refetches = list(state.refetches)
        self._repeats_seen = state.repeats_seen
        self._repeats_after_change = state.repeats_after_change

    @property
    def guarded_calls(self) -> frozenset[CallPlace]:
        """The calls whose results the guard keeps."""
        return frozenset(self._guarded_calls)

    @property
    def refetches(self) -> tuple[Refetch, ...]:
        return tuple(self._refetches)

    def read_up_to(self, end: int, masked: Callable[[int, str], bool]) -> list[CallPlace]:
        """Read the calls of the answers that begin before item ``end``: the
        model made them seeing the request as it went out then, in which
        ``masked(turn, call_id)`` says whether a call's result was masked.
        Returns the calls the guard keeps from now on."""
        turns, newly_guarded = self._turns, []
        while self._turns_read < len(turns) and turns[self._turns_read].location[0] < end:
            number = self._turns_read
            answer = turns[number].location[0]
            if number < len(self._readings):
                calls = self._readings[number]
            else:
                calls = tuple(calls_of(self._items, turns[number]))
                self._readings.append(calls)
            for call in calls:
                if self._read(call, number, answer, masked):
                    newly_guarded.append((number, call[0]))
            self._turns_read += 1
        return newly_guarded

    def _read(self, call: Call, turn: int, answer: int,
              masked: Callable[[int, str], bool]) -> bool:
        """Take in one call; is it one the guard keeps?"""
        call_id, tool_name, key, reads_only = call
        sequence = self._calls
        self._calls += 1
        earlier = self._seen.get(key)
        if earlier is not None:
            earlier_sequence, earlier_turn, earlier_call_id = earlier
            # A change between the two (the earlier call itself not included).
            if self._last_change > earlier_sequence:
                self._repeats_after_change += 1
            elif masked(earlier_turn, earlier_call_id):
                self._refetches.append(Refetch(call_id, tool_name, turn, answer,
                                               earlier_call_id, earlier_turn))
                if self._guard:
                    self._guarded_keys.add(key)
            else:
                self._repeats_seen += 1
        self._seen[key] = (sequence, turn, call_id)
        if not reads_only:
            self._last_change = sequence
        if self._guard and key in self._guarded_keys:
            self._guarded_calls.add((turn, call_id))
            return True
        return False

    def state(self) -> WatchState:
        return WatchState(
            turns_read=self._turns_read, calls=self._calls, last_change=self._last_change,
            seen=dict(self._seen), guarded_keys=frozenset(self._guarded_keys),
            guarded_calls=frozenset(self._guarded_calls), refetches=tuple(self._refetches),
            repeats_seen=self._repeats_seen, repeats_after_change=self._repeats_after_change,
            readings=tuple(self._readings[:self._turns_read]))


def refetch_facts(refetches: Sequence[Refetch], index: ToolTurnIndex,
                  guarded_results: int) -> RefetchFacts:
    """What a request shows of re-fetches: those in the model's newest
    answer (new with this request; counting these alone counts each once
    per conversation), the tokens of their results, whether that answer
    made nothing but re-fetches (a model turn the agent would not have
    needed), the conversation's count, and the results the guard keeps."""
    if not refetches and not guarded_results:
        return RefetchFacts()
    newest = index.answer_starts[-1] if index.answer_starts else -1
    new = [refetch for refetch in refetches if refetch.answer == newest]
    places = {(refetch.turn, refetch.call_id) for refetch in new}
    chars = sum(len(result.text or "") for result in index.results
                if (result.turn, result.call_id) in places)
    tools: dict[str, int] = {}
    for refetch in new:
        tool = refetch.tool_name or UNKNOWN_TOOL
        tools[tool] = tools.get(tool, 0) + 1
    calls_in_answer = sum(len(turn.call_ids) for turn in index.turns
                          if turn.location[0] == newest)
    return RefetchFacts(
        new=len(new), new_calls=tuple(refetch.call_id for refetch in new),
        new_tools=tuple(sorted(tools.items())),
        result_tokens=-(-chars // CHARS_PER_TOKEN),
        extra_turns=int(bool(new) and len(new) == calls_in_answer),
        in_conversation=len(refetches), guarded_results=guarded_results)


def count_repeats(index: ToolTurnIndex, items: Sequence[object]) -> WatchState:
    """Every call of the request read with nothing masked: its repeats, after
    a possible change or not (``repeats_after_change``, ``repeats_seen``),
    as the detection reads them; ``calls`` counts the calls."""
    watch = RefetchWatch(index, items, guard=False)
    watch.read_up_to(len(items), lambda turn, call_id: False)
    return watch.state()
