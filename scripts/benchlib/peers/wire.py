"""What the peers bench needs to know of each wire format: where a client
sends it, with which headers, and where its tool results are.

The tool results are found here with plain rules of the formats, not with
obsmask's own index, so that the bench judges every proxy by the same
reading:

- Chat Completions: a message with role ``tool``; its value is ``content``,
  its id ``tool_call_id``;
- Anthropic Messages: a ``tool_result`` block of a message's content list;
  its value is the block's ``content``, its id ``tool_use_id``;
- OpenAI Responses: an item of type ``function_call_output`` (or another
  ``*_call_output``); its value is ``output``, its id ``call_id``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

CHAT, ANTHROPIC, RESPONSES = "chat", "anthropic", "responses"
FORMATS = (CHAT, ANTHROPIC, RESPONSES)

# Paths under a base URL ending in /v1: each proxy's client is pointed at
# ``http://127.0.0.1:PORT`` and sends to these, as the SDKs do.
ROUTES = {CHAT: "/v1/chat/completions", ANTHROPIC: "/v1/messages", RESPONSES: "/v1/responses"}
LIST_MEMBERS = {CHAT: "messages", ANTHROPIC: "messages", RESPONSES: "input"}
# The member sent in front of the list, never a tool result.
PREAMBLES = {ANTHROPIC: "system", RESPONSES: "instructions"}
ANTHROPIC_VERSION = "2023-06-01"
# A key no real provider accepts: the upstream is local, and a proxy that
# sent it anywhere else would be refused there.
API_KEY = "sk-bench-peers-local"


def headers(fmt: str, length: int) -> dict[str, str]:
    """The headers the format's SDK sends with a JSON body."""
    common = {"content-type": "application/json", "content-length": str(length),
              "accept": "application/json", "user-agent": "obsmask-bench-peers"}
    if fmt == ANTHROPIC:
        return {**common, "x-api-key": API_KEY, "anthropic-version": ANTHROPIC_VERSION}
    return {**common, "authorization": f"Bearer {API_KEY}"}


def format_of_path(path: str) -> str | None:
    """The format a request path is of (its query left out), or None."""
    route = path.split("?", 1)[0].rstrip("/")
    for fmt, suffix in ROUTES.items():
        if route.endswith(suffix.removeprefix("/v1")):
            return fmt
    return None


@dataclass(frozen=True)
class ResultPlace:
    """Where one tool result's value sits: item ``item``, then, in Anthropic
    Messages, block ``block`` of its content; ``key`` names the value."""

    item: int
    block: int | None
    key: str
    result_id: str


def _responses_output(item: dict[str, object]) -> bool:
    kind = item.get("type")
    return isinstance(kind, str) and kind.endswith("_call_output")


def result_places(fmt: str, items: list[object]) -> Iterator[ResultPlace]:
    """Every tool result of a conversation list, in order."""
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        if fmt == CHAT and item.get("role") == "tool":
            yield ResultPlace(position, None, "content", str(item.get("tool_call_id", "")))
        elif fmt == RESPONSES and _responses_output(item):
            yield ResultPlace(position, None, "output", str(item.get("call_id", "")))
        elif fmt == ANTHROPIC and isinstance(item.get("content"), list):
            content = item["content"]
            assert isinstance(content, list)
            for at, block in enumerate(content):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    yield ResultPlace(position, at, "content", str(block.get("tool_use_id", "")))


def result_value(items: list[object], place: ResultPlace) -> object:
    """The value at ``place`` (None where the list has no such value)."""
    item = items[place.item] if place.item < len(items) else None
    if place.block is not None and isinstance(item, dict):
        content = item.get("content")
        item = content[place.block] if isinstance(content, list) and place.block < len(
            content) else None
    return item.get(place.key) if isinstance(item, dict) else None
