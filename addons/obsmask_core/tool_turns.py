"""Tool turns and the tool results attached to them (spec 001 §2).

The masking decision works on this model only, so every wire format needs
just a function that builds it; this module has the one for OpenAI Chat
Completions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

ChatMessage = dict[str, object]


@dataclass(frozen=True)
class ToolTurn:
    """An assistant message that called at least one tool (several: parallel calls)."""

    location: tuple[int, ...]
    call_ids: tuple[str, ...]


@dataclass(frozen=True)
class ToolResult:
    """A tool result linked to the turn that called it.

    ``location`` is where the result sits in the request (for Chat Completions,
    the index of the ``role: "tool"`` message). ``content`` is the value that
    masking may replace, as found (a string, or anything else, which is left).
    """

    location: tuple[int, ...]
    call_id: str
    turn: int
    tool_name: str | None
    content: object


@dataclass
class ToolTurnIndex:
    turns: list[ToolTurn] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    # Tool results that name no call of an earlier turn (spec 001 §5.2.1: no-op).
    orphans: list[tuple[int, ...]] = field(default_factory=list)


def _tool_calls_of(message: ChatMessage) -> list[tuple[str, str | None]]:
    """(id, function name) of each call with a non-empty string id."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    found: list[tuple[str, str | None]] = []
    for call in calls:
        if not isinstance(call, dict):
            continue
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            continue
        function = call.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        found.append((call_id, name if isinstance(name, str) and name else None))
    return found


def index_chat_tool_turns(messages: Sequence[object]) -> ToolTurnIndex:
    """Build the tool-turn model of a Chat Completions ``messages`` list.

    A result belongs to the most recent *earlier* turn that declared its id.
    The spec's pseudocode keeps one global id -> turn map, which goes wrong
    for clients that reuse ids such as ``call_0`` in every turn (several
    OpenAI-compatible servers do): their old results would all look recent.
    A result that comes before any turn declaring its id is an orphan.
    """
    index = ToolTurnIndex()
    # id -> (turn number, tool name) of the latest turn so far that declared it
    declared: dict[str, tuple[int, str | None]] = {}
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            calls = _tool_calls_of(message)
            if not calls:
                continue
            turn_number = len(index.turns)
            index.turns.append(
                ToolTurn(location=(position,), call_ids=tuple(c for c, _ in calls))
            )
            for call_id, name in calls:
                declared[call_id] = (turn_number, name)
        elif role == "tool":
            result_id = message.get("tool_call_id")
            if not isinstance(result_id, str) or not result_id:
                continue  # spec 001 §5.1: the id must be a non-empty string
            link = declared.get(result_id)
            if link is None:
                index.orphans.append((position,))
                continue
            turn_number, name = link
            index.results.append(
                ToolResult(
                    location=(position,),
                    call_id=result_id,
                    turn=turn_number,
                    tool_name=name,
                    content=message.get("content"),
                )
            )
    return index
