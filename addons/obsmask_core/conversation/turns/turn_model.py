"""The one model of a conversation's tool use, whatever the wire format: tool
turns, the results attached to them, and the rule that links them.

A result belongs to the most recent *earlier* turn that declared its id.
One global id -> turn map (the obvious way to write it) goes wrong for
clients that reuse ids such as ``call_0`` in every turn (several
OpenAI-compatible servers do): their old results would all look recent. A
result that comes before any turn declaring its id is an orphan.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

ChatMessage = dict[str, object]
Location = tuple[int, ...]


# ToolTurn, ToolResult (and the planner's MaskDecision) are made for every
# turn and result of every request: named tuples, immutable and typed, are
# built much faster than a frozen dataclass.
class ToolTurn(NamedTuple):
    """One model turn that called at least one tool (several: parallel calls)."""

    location: Location
    call_ids: tuple[str, ...]
    # Index of the turn's last item (its assistant message, or its last call).
    last: int = 0


class ToolResult(NamedTuple):
    """A tool result linked to the turn that called it.

    ``location`` says where the result sits: the index of the message or item,
    then, for Anthropic, of the block. ``text`` is what masking may replace
    (None when the result holds no text it can replace, e.g. a list of image
    parts); ``content`` is the value as found. ``is_error`` is the format's own
    error flag (Anthropic's ``is_error``).
    """

    location: Location
    call_id: str
    turn: int
    tool_name: str | None
    content: object
    text: str | None
    is_error: bool = False


@dataclass
class ToolTurnIndex:
    turns: list[ToolTurn] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    # Tool results that name no call of an earlier turn: never masked.
    orphans: list[Location] = field(default_factory=list)
    # Where each answer of the model begins, with or without tool calls: a
    # request of the conversation ends just before one of these.
    answer_starts: list[int] = field(default_factory=list)

    def request_end_after(self, turn: int, items: int) -> int:
        """Where the first request that holds turn ``turn`` and its results
        ends: at the model's next answer, or at the end of the list."""
        following = bisect.bisect_right(self.answer_starts, self.turns[turn].last)
        return self.answer_starts[following] if following < len(self.answer_starts) else items

    def request_ends(self, items: int) -> list[int]:
        """Where each request of the conversation ended, in a list of
        ``items`` items: just before each of the model's answers, and the
        last request at the end of the list."""
        ends = [start for start in self.answer_starts if 0 < start < items]
        ends.append(items)
        return ends

    def request_ends_after(self, after: int, items: int) -> list[int]:
        """``request_ends`` past item boundary ``after``: a replay resumed
        there walks only the requests it has not replayed (none when
        ``after`` is the end: the same request planned again). The answers'
        starts are in the order of their items, as the index adds them."""
        starts = self.answer_starts
        first = bisect.bisect_right(starts, after)
        ends = list(itertools.takewhile(items.__gt__, itertools.islice(starts, first, None)))
        if items > after:
            ends.append(items)
        return ends


class Linker:
    """Collects turns and links each result to the latest earlier turn."""

    def __init__(self, index: ToolTurnIndex | None = None,
                 declared: dict[str, tuple[int, str | None]] | None = None) -> None:
        # Given both: going on from where another list's first items left it.
        self.index = index if index is not None else ToolTurnIndex()
        # id -> (turn number, tool name) of the latest turn so far that declared it
        self._declared: dict[str, tuple[int, str | None]] = \
            declared if declared is not None else {}

    @property
    def declared(self) -> dict[str, tuple[int, str | None]]:
        return self._declared

    def messages(
        self, messages: Sequence[object]
    ) -> Iterator[tuple[int, dict[str, object], object]]:
        """Each message object of a ``messages`` list with its position and
        role, the model's answers recorded in the index (``dict_messages``)."""
        return dict_messages(messages, self.index.answer_starts)

    def turn(
        self, location: Location, calls: list[tuple[str, str | None]], last: int | None = None
    ) -> None:
        if not calls:
            return
        number = len(self.index.turns)
        declared = self._declared
        for call_id, name in calls:
            declared[call_id] = (number, name)
        self.index.turns.append(ToolTurn(location, tuple([call_id for call_id, _ in calls]),
                                         location[0] if last is None else last))

    def result(
        self,
        location: Location,
        call_id: object,
        content: object,
        text: str | None,
        is_error: bool = False,
    ) -> None:
        if not isinstance(call_id, str) or not call_id:
            return  # a result is only linked by a non-empty string id
        link = self._declared.get(call_id)
        if link is None:
            self.index.orphans.append(location)
            return
        number, name = link
        self.index.results.append(
            ToolResult(location, call_id, number, name, content, text, is_error)
        )


def dict_messages(
    messages: Sequence[object], answer_starts: list[int], start: int = 0
) -> Iterator[tuple[int, dict[str, object], object]]:
    """Each message object of a ``messages`` list from ``start``, with its
    position and role. An assistant message is recorded in ``answer_starts``
    as the start of one of the model's answers, whatever its content's shape
    (a plain string answer included): a request of the conversation ends
    just before one."""
    for position in range(start, len(messages)):
        message = messages[position]
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            answer_starts.append(position)
        yield position, message, role


def name_of(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def call_id_of(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
