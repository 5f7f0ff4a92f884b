"""The three request formats obsmask masks, and how a placeholder is written
into each.

A format says which top-level array holds the conversation, how to build the
tool-turn model from it, where a result's replaceable value sits inside its
item, and what that value becomes when the result is masked:

- a string becomes the placeholder string (all three formats);
- a list of blocks (Anthropic ``tool_result.content``, Responses ``output``)
  keeps its non-text blocks (images, documents) where they are, and its text
  blocks become one text block holding the placeholder, at the place of the
  first one. That block keeps the first text block's other fields
  (``cache_control`` among them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from obsmask_core.conversation.body.request_text import PathStep
from obsmask_core.conversation.turns.tool_turns import (
    ANTHROPIC_TEXT_TYPES,
    RESPONSES_TEXT_TYPES,
    IndexedItems,
    index_anthropic_items,
    index_anthropic_tool_turns,
    index_chat_items,
    index_chat_tool_turns,
    index_responses_items,
    index_responses_tool_turns,
    text_blocks,
)
from obsmask_core.conversation.turns.turn_model import Location, ToolTurnIndex


@dataclass(frozen=True)
class WireFormat:
    name: str
    list_member: str
    index: Callable[[Sequence[object]], ToolTurnIndex]
    # Path from the item to the replaced value, given the result's location.
    value_path: Callable[[Location], tuple[PathStep, ...]]
    text_types: tuple[str, ...]
    # The index with what a longer list needs to resume it (``IndexedItems``;
    # a Responses list that ends inside a run of calls or an answer does
    # not resume: the items added may go on with it).
    index_items: Callable[[Sequence[object], IndexedItems | None], IndexedItems]

    def replacement(self, original: object, placeholder: str) -> object:
        """The new value of a masked result."""
        blocks = text_blocks(original, self.text_types)
        if not isinstance(original, list) or blocks is None:
            return placeholder
        first = blocks[0]
        out: list[object] = []
        for block in original:
            if block is first:
                out.append({**first, "text": placeholder})
            elif not any(block is other for other in blocks):
                out.append(block)
        return out


CHAT = WireFormat(
    name="chat",
    list_member="messages",
    index=index_chat_tool_turns,
    value_path=lambda location: ("content",),
    text_types=(),
    index_items=index_chat_items,
)
ANTHROPIC = WireFormat(
    name="anthropic",
    list_member="messages",
    index=index_anthropic_tool_turns,
    value_path=lambda location: ("content", location[1], "content"),
    text_types=ANTHROPIC_TEXT_TYPES,
    index_items=index_anthropic_items,
)
RESPONSES = WireFormat(
    name="responses",
    list_member="input",
    index=index_responses_tool_turns,
    value_path=lambda location: ("output",),
    text_types=RESPONSES_TEXT_TYPES,
    index_items=index_responses_items,
)
FORMATS: Mapping[str, WireFormat] = MappingProxyType(
    {fmt.name: fmt for fmt in (CHAT, ANTHROPIC, RESPONSES)})


def _get(container: object, key: PathStep) -> object:
    if isinstance(container, dict) and isinstance(key, str):
        return container[key]
    if isinstance(container, list) and isinstance(key, int):
        return container[key]
    raise TypeError(f"cannot follow {key!r} into a {type(container).__name__}")


def _put(container: object, key: PathStep, value: object) -> None:
    if isinstance(container, dict) and isinstance(key, str):
        container[key] = value
    elif isinstance(container, list) and isinstance(key, int):
        container[key] = value
    else:
        raise TypeError(f"cannot set {key!r} in a {type(container).__name__}")


def _shallow_copy(value: object) -> object:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value


def value_at(items: list[object], index: int, path: tuple[PathStep, ...]) -> object:
    """``items[index][path...]``; TypeError, KeyError or IndexError if the
    way there is not as the path says."""
    value = _get(items, index)
    for step in path:
        value = _get(value, step)
    return value


def set_at(items: list[object], index: int, path: tuple[PathStep, ...], value: object) -> None:
    """``items[index][path...] = value``, copying every container on the way,
    so the objects the caller still holds (the original request) stay as they were."""
    parent: object = items
    key: PathStep = index
    for step in path:
        child = _shallow_copy(_get(parent, key))
        _put(parent, key, child)
        parent, key = child, step
    _put(parent, key, value)
