"""How a client sends each request of a session: the body's bytes, and the
members and list they read as.

- Anthropic Messages, as Claude Code sends them: ``system`` is a list of two
  text blocks, a short first one (``CLAUDE_CODE_FIRST_BLOCK``) and the
  session's system text, both with ``cache_control: {"type":
  "ephemeral"}``, and the last content block of the last message carries
  the same ``cache_control`` (a string content becomes one text block for
  that). A ``cache_control`` the session's messages already carry is left
  out (a recorded session holds the marks of its last request only, where
  the client put them for that request). A system that is already a list
  is the client's own and goes as it is; the tool definitions and the
  other members go as the session has them (a session may mark a tool).
- Chat Completions and OpenAI Responses: as the session has them.

With ``model``, every request carries that model id in its ``model``
member (put first when the session has none), as a client of that model
sends it.

The body is the members, then the list, as compact JSON; each item's bytes
are written once per session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import orjson

from obsmask_core.conversation.planning.holdout import IGNORED_KEYS
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from obsmask_core.offline.cache.formats import PREAMBLE_MEMBERS
from obsmask_core.offline.cache.sessions import Session

CLAUDE_CODE_FIRST_BLOCK = "You are Claude Code, Anthropic's official CLI for Claude."


def ephemeral() -> dict[str, object]:
    """A ``cache_control`` of five minutes, new for each block that carries
    one (a body must not share it with another)."""
    return {"type": "ephemeral"}


@dataclass(frozen=True)
class Request:
    """A request body read as its top-level members but the list (``head``)
    and its list (``items``)."""

    head: dict[str, object]
    items: list[object]


@dataclass(frozen=True)
class SentRequest:
    body: bytes
    request: Request


def dump(value: object) -> bytes:
    """Compact JSON; a string orjson refuses (a lone surrogate) is escaped."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def claude_code_system(system: object) -> object:
    """Claude Code's two marked system blocks around a system text; a list
    (a client's own blocks) or nothing as it is."""
    if not isinstance(system, str):
        return system
    return [{"type": "text", "text": CLAUDE_CODE_FIRST_BLOCK, "cache_control": ephemeral()},
            {"type": "text", "text": system, "cache_control": ephemeral()}]


def unmarked(item: object) -> object:
    """The item without the ``cache_control`` of its content blocks (the
    item itself when it has none)."""
    content = item.get("content") if isinstance(item, dict) else None
    if not isinstance(item, dict) or not isinstance(content, list) or not any(
            isinstance(block, dict) and IGNORED_KEYS & block.keys() for block in content):
        return item
    return {**item, "content": [
        {key: value for key, value in block.items() if key not in IGNORED_KEYS}
        if isinstance(block, dict) else block for block in content]}


def marked(item: object) -> object:
    """The item with ``cache_control`` on its last content block (a string
    content made one text block); the item itself when it has no block."""
    if not isinstance(item, dict):
        return item
    content = item.get("content")
    if isinstance(content, str):
        blocks: list[object] = [{"type": "text", "text": content, "cache_control": ephemeral()}]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        blocks = [*content[:-1], {**content[-1], "cache_control": ephemeral()}]
    else:
        return item
    return {**item, "content": blocks}


class ClientRequests:
    """The requests of ``session`` as its client sends them (with
    ``model``: to that model)."""

    def __init__(self, session: Session, model: str | None = None) -> None:
        self._claude_code = session.fmt is ANTHROPIC
        head = dict(session.members)
        if model is not None and "model" in head:
            head["model"] = model
        elif model is not None:
            head = {"model": model, **head}
        member = PREAMBLE_MEMBERS.get(session.fmt.name)
        if member is not None and session.preamble is not None:
            head[member] = (claude_code_system(session.preamble) if self._claude_code
                            else session.preamble)
        self._head = head
        self._items = ([unmarked(item) for item in session.messages] if self._claude_code
                       else session.messages)
        written = dump(head)
        self._start = (written[:-1] + (b"," if head else b"")
                       + dump(session.fmt.list_member) + b":[")
        self._written: list[bytes | None] = [None] * len(self._items)

    @property
    def items(self) -> list[object]:
        """The session's items as the client sends them when not last."""
        return self._items

    def _bytes(self, position: int) -> bytes:
        written = self._written[position]
        if written is None:
            written = self._written[position] = dump(self._items[position])
        return written

    def request(self, end: int) -> SentRequest:
        """The request made of the first ``end`` items."""
        items = self._items[:end]
        parts = [self._bytes(position) for position in range(end)]
        if self._claude_code and items:
            items[-1] = marked(items[-1])
            parts[-1] = dump(items[-1])
        body = b"".join((self._start, b",".join(parts), b"]}"))
        return SentRequest(body, Request(self._head, items))
