"""Claude Code-shaped conversations for the load benchmark: the real
Anthropic sessions of fixtures/sessions/anthropic/ as Claude Code sends
them (``benchlib.cache.claude_code``: its twelve tool definitions, about
48 kB; its ``<system-reminder>`` messages, left in the history; its two
marked system blocks), every request written by ``ClientRequests``: the
moving breakpoint on the last block of that request, so an agent's next
request is its previous one with items added and the breakpoint moved to
the new last block.

``ClaudeCodeConversation`` is one such session as the requests of an
agent's conversation (``agents.Agents`` takes it as it takes a
``Conversation``): its first item is the agent's own user message
(``agents.first_item``), so that no two agents send the same bytes.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

from benchlib.cache.claude_code import claude_code_sessions
from obsmask_core.offline.cache.clients import ClientRequests
from obsmask_core.offline.cache.sessions import Session, load_real_sessions


def claude_code_of(sessions_folder: Path, model: str | None = None) -> list[Session]:
    """The Anthropic sessions of ``sessions_folder`` (fixtures/sessions/) as
    Claude Code sends them, numbered as bench_cache numbers them, to
    ``model`` (None: the session's own)."""
    sessions = claude_code_sessions(load_real_sessions(sessions_folder, ("anthropic",)))
    if model is None:
        return sessions
    return [replace(session, members={**session.members, "model": model})
            for session in sessions]


def last_request(session: Session) -> bytes:
    """The session's last request, as Claude Code sends it."""
    return ClientRequests(session).request(session.request_ends[-1]).body


class ClaudeCodeConversation:
    """A Claude Code-shaped session as the requests of agents'
    conversations, each agent's with its own first item."""

    def __init__(self, session: Session) -> None:
        self.session = session
        # How many items each request holds, the agent's first item among them.
        self.ends: tuple[int, ...] = tuple(end + 1 for end in session.request_ends)
        self._clients: dict[bytes, ClientRequests] = {}
        self._lock = threading.Lock()

    def _client(self, first_item: bytes) -> ClientRequests:
        with self._lock:
            client = self._clients.get(first_item)
            if client is None:
                first: object = json.loads(first_item)
                session = self.session
                client = self._clients[first_item] = ClientRequests(Session(
                    session.name, session.kind, [first, *session.messages],
                    [end + 1 for end in session.request_ends], session.fmt, session.preamble,
                    members=session.members))
            return client

    def request(self, step: int, first_item: bytes) -> bytes:
        """The body of request ``step`` (modulo the conversation's length)
        of the agent whose first item is ``first_item``, as Claude Code
        sends it."""
        return self._client(first_item).request(self.ends[step % len(self.ends)]).body
