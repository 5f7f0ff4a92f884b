"""A request body, as it was forwarded, read as the prompt a provider's cache
sees (``obsmask_core.offline.cache.prompt_blocks.Prompt``): its blocks in cache order (the tool
definitions, then the system blocks, then each item's content blocks; see
``obsmask_core.offline.cache.block_tokens``), and its breakpoints.

A breakpoint is a block that carries ``cache_control`` (a tool definition,
a system block, a content block of an item), and, when the body has a
top-level ``cache_control`` (Anthropic's automatic caching), the last block;
``"ttl": "1h"`` makes its entry live one hour, anything else five minutes.
Breakpoints are read in every format: only Anthropic's bodies have them.

``breakpoint_errors`` says what a forwarded body did to the client's
breakpoints: more than four (the API answers 400), or one of the client's
moved or removed. Masking must do neither.

An item is read once: the client's items by their position, and each
replay's items of its previous request (a placeholder comes back in every
request after the one that masked its result); an equal item takes their
reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.offline.cache.block_tokens import Block, MessageTokens
from obsmask_core.offline.cache.clients import Request
from obsmask_core.offline.cache.formats import PREAMBLE_MEMBERS
from obsmask_core.offline.cache.model import MAX_BREAKPOINTS
from obsmask_core.offline.cache.prompt_blocks import (
    FIVE_MINUTES,
    ONE_HOUR,
    Breakpoint,
    Prompt,
    make_prompt,
)
from obsmask_core.shared.message_tokens import TOKENS_REPLY_PRIMING

CACHE_CONTROL = "cache_control"
Mark = tuple[int, float]  # (block within its item or list, ttl)


def _ttl(control: object) -> float:
    return ONE_HOUR if isinstance(control, dict) and control.get("ttl") == "1h" else FIVE_MINUTES


def marks(blocks: object) -> tuple[Mark, ...]:
    """(position, ttl) of the blocks of a list that carry ``cache_control``."""
    if not isinstance(blocks, list):
        return ()
    return tuple((position, _ttl(block[CACHE_CONTROL])) for position, block in enumerate(blocks)
                 if isinstance(block, dict) and CACHE_CONTROL in block)


@dataclass(frozen=True)
class ItemReading:
    """An item's blocks, and which of them carry ``cache_control``."""

    blocks: tuple[Block, ...]
    marks: tuple[Mark, ...]


@dataclass(frozen=True)
class PromptParts:
    """A request as its prompt's parts."""

    model: str
    blocks: list[Block]
    breakpoints: tuple[Breakpoint, ...]

    def prompt(self, time: float, previous: Prompt | None) -> Prompt:
        return make_prompt(self.model, self.blocks, self.breakpoints, time,
                           TOKENS_REPLY_PRIMING, reuse=previous)


@dataclass(frozen=True)
class BreakpointErrors:
    """What a forwarded body did wrong with the breakpoints (each at most once)."""

    over_limit: bool  # more than MAX_BREAKPOINTS
    client_moved_or_removed: bool  # a client breakpoint not where the client put it


def breakpoint_errors(sent: Sequence[Breakpoint],
                      forwarded: Sequence[Breakpoint]) -> BreakpointErrors:
    return BreakpointErrors(len(forwarded) > MAX_BREAKPOINTS,
                            not set(sent) <= set(forwarded))


class ItemReadings:
    """The readings of one session's items as its client sends them (by
    position), shared by the replays of the session."""

    def __init__(self, fmt: WireFormat, tokens: MessageTokens,
                 client_items: Sequence[object]) -> None:
        self.fmt = fmt
        self.tokens = tokens
        self.client_items = client_items
        self._client: dict[int, ItemReading] = {}

    def read(self, item: object) -> ItemReading:
        content = item.get("content") if isinstance(item, dict) else None
        return ItemReading(self.tokens.item_blocks(item), marks(content))

    def client(self, position: int) -> ItemReading:
        found = self._client.get(position)
        if found is None:
            found = self._client[position] = self.read(self.client_items[position])
        return found


class PromptReader:
    """Reads the requests of one replay, in order."""

    def __init__(self, items: ItemReadings) -> None:
        self._items = items
        self._previous: list[tuple[object, ItemReading]] = []
        self._front: tuple[object, list[Block], tuple[Mark, ...]] | None = None

    def _item(self, position: int, item: object) -> ItemReading:
        client = self._items.client_items
        if position < len(client) and item is client[position]:
            return self._items.client(position)
        if position < len(self._previous):
            before, reading = self._previous[position]
            if item is before or item == before:
                return reading
        if position < len(client) and item == client[position]:
            return self._items.client(position)
        return self._items.read(item)

    def _front_blocks(self, tools: list[object],
                      system: object) -> tuple[list[Block], tuple[Mark, ...]]:
        """The tool definitions' and the system's blocks, and their marks
        (kept while they are equal to the previous request's)."""
        front = (tools, system)
        if self._front is not None and self._front[0] == front:
            return self._front[1], self._front[2]
        blocks = [self._items.tokens.tool_block(tool) for tool in tools]
        found = marks(tools)
        if system is not None:
            found += tuple((len(blocks) + at, ttl) for at, ttl in marks(system))
            blocks += self._items.tokens.item_blocks({"content": system})
        self._front = (front, blocks, found)
        return blocks, found

    def read(self, request: Request) -> PromptParts:
        tools = request.head.get("tools")
        member = PREAMBLE_MEMBERS.get(self._items.fmt.name)
        system = request.head.get(member) if member is not None else None
        front, front_marks = self._front_blocks(tools if isinstance(tools, list) else [], system)
        blocks = list(front)
        points = [Breakpoint(at, ttl) for at, ttl in front_marks]
        readings = [(item, self._item(position, item))
                    for position, item in enumerate(request.items)]
        for _, reading in readings:
            points += [Breakpoint(len(blocks) + at, ttl) for at, ttl in reading.marks]
            blocks += reading.blocks
        if CACHE_CONTROL in request.head and blocks:
            points.append(Breakpoint(len(blocks) - 1, _ttl(request.head[CACHE_CONTROL])))
        self._previous = readings
        model = request.head.get("model")
        return PromptParts(model if isinstance(model, str) else "", blocks, tuple(points))
