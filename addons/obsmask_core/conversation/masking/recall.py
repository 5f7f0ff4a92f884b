"""Recall of a masked result, from the request itself: no store.

The recall tool answers a call with a stub naming the result it wants
(``shared.recall_text``). The client sends that stub back as the content
of a tool result in its next request, and every request after; the
request also holds the original of the named result, since the client
always re-sends its history unmasked. So the stub is replaced by the text
asked for, taken from the same request: the same request always gives the
same bytes (the provider's cache keeps them), any proxy of a fleet gives
the same answer, and nothing is kept anywhere.

A recalled result is then a result like any other, with the recalled text
as its text: it stays whole while its turn is in the window, and is masked
when it leaves it (and the bill allows), as its own original was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.conversation.masking.apply import replace_results
from obsmask_core.conversation.turns.turn_model import Location, ToolTurnIndex
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.shared.recall_text import (
    RecallQuery,
    find_stub,
    is_recall_tool,
    not_in_request,
)


@dataclass(frozen=True)
class RecalledResult:
    """One stub of the request, and the text that replaces it."""

    location: Location
    call_id: str
    tool_name: str | None
    query: RecallQuery
    stub: str  # the result's text as the client sent it
    stub_value: object  # its value as found (a string or a list of blocks)
    text: str  # the part of the original asked for, or a note that it is gone
    found: bool


def find_recalls(index: ToolTurnIndex) -> list[RecalledResult]:
    """The stubs among the results of the recall tool in the request, in
    order, each with its text. The original is the latest earlier result of that call id (a
    recalled result counts with its recalled text, so a recall of a recall
    gives the text again)."""
    texts: dict[str, str] = {}  # call id -> the text of its latest result
    recalls: list[RecalledResult] = []
    for result in index.results:
        text = result.text
        if text is None:
            continue
        query = find_stub(text) if is_recall_tool(result.tool_name) else None
        if query is not None:
            original = texts.get(query.recall_id)
            recalled = (query.select(original) if original is not None
                        else not_in_request(query.recall_id))
            recalls.append(RecalledResult(result.location, result.call_id, result.tool_name, query,
                                  text, result.content, recalled, original is not None))
            text = recalled
        texts[result.call_id] = text
    return recalls


def with_recalls(items: Sequence[object], recalls: list[RecalledResult],
                 fmt: WireFormat) -> list[object]:
    """The conversation list as it will go out before masking: each stub
    replaced by its text (the input is not modified)."""
    return replace_results(items, fmt, ((r.location, r.stub_value, r.text) for r in recalls))
