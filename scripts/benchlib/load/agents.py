"""Agents for the load benchmark: each client carries on conversations of its
own, as an agent does: one of Chat Completions (the ``chat``, ``chat-sse``
and ``chat-gzip`` kinds of the mix go on with it, as an agent streams some
answers and not others), one of 1.5 MB Chat Completions histories, one of
Anthropic Messages, one of OpenAI Responses, and one of Anthropic Messages
as Claude Code sends them (``claude_code.ClaudeCodeConversation``: written
as Claude Code writes them, its moving breakpoint on the last block of
each request).

An agent sends its whole history again with every request: each request of
a conversation is the one before with the model's answer and what followed
it added. Here a conversation is one of the real sessions, request after
request (``Conversation.request``): its items up to each answer of the
model, then all of them, written the same way every time (the way
``json.dumps`` writes them). A conversation is an agent's own: its first
item is a user message naming the client and the group, so no two clients
share a conversation or send the same bytes (as two agents would not), and
a request is never a retry of another client's.

Each client begins its conversation at another of the session's requests
(the sessions are 20-280 KB at the end; the 1.5 MB histories begin near
theirs) and goes on from there, one request each time it comes back to the
group, back to the start after the last one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

# The items a model writes: a run of them is one answer, and a request of
# the conversation ends just before each answer.
_MODEL_ROLES = ("assistant",)
_MODEL_TYPES = ("function_call", "custom_tool_call", "local_shell_call", "reasoning")
# Where a 1.5 MB conversation begins: this many requests before its end.
LARGE_FROM_END = 24


def _written_by_model(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    return item.get("role") in _MODEL_ROLES or item.get("type") in _MODEL_TYPES


class Replayed(Protocol):
    """A session as the requests of agents' conversations."""

    @property
    def ends(self) -> tuple[int, ...]: ...

    def request(self, step: int, first_item: bytes) -> bytes: ...


@dataclass(frozen=True)
class Conversation:
    """A session, as the requests of its conversation: ``head`` is the body
    up to its list's first item, ``items`` each item as written, ``tail``
    the list's end and the members after it, ``ends`` how many items each
    request holds."""

    head: bytes
    items: tuple[bytes, ...]
    tail: bytes
    ends: tuple[int, ...]

    @classmethod
    def of(cls, body: bytes, list_member: str) -> Conversation:
        document = json.loads(body)
        items = document[list_member]
        marker = "\u0000items\u0000"
        head, tail = json.dumps({**document, list_member: [marker]}).encode().split(
            json.dumps(marker).encode())
        ends = [i for i in range(1, len(items))
                if _written_by_model(items[i]) and not _written_by_model(items[i - 1])]
        return cls(head, tuple(json.dumps(item).encode() for item in items), tail,
                   (*ends, len(items)))

    def request(self, step: int, first_item: bytes) -> bytes:
        """The body of request ``step`` (modulo the conversation's length),
        with ``first_item`` first."""
        count = self.ends[step % len(self.ends)]
        return b"".join((self.head, first_item, b", ", b", ".join(self.items[:count]),
                         self.tail))


def first_item(client: int, group: str) -> bytes:
    """The user message that makes a client's conversation its own."""
    return json.dumps({"role": "user", "content": f"bench agent {client}, {group}"}).encode()


class Agents:
    """Where each client's conversation of each group stands. A client is
    one thread, and only it touches its own conversations."""

    def __init__(self, conversations: Mapping[str, Sequence[Replayed]]) -> None:
        self.conversations = conversations  # by group of sessions
        self._steps: dict[tuple[int, str], int] = {}

    def body(self, client: int, kind: str, sessions: str) -> bytes:
        """The next request of ``client``'s conversation of the ``sessions``
        group, sent as a request of ``kind``: the kinds of a group (``chat``,
        ``chat-sse`` and ``chat-gzip``, say) go on with the same
        conversation, as one agent streams some answers and not others."""
        group = self.conversations[sessions]
        conversation = group[client % len(group)]
        key = (client, sessions)
        step = self._steps.get(key)
        if step is None:
            step = (len(conversation.ends) - LARGE_FROM_END if sessions == "chat_large"
                    else 7 * client)
        self._steps[key] = step + 1
        return conversation.request(step, first_item(client, sessions))
