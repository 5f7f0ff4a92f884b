"""The requests of the load benchmark's mix, one kind per route and answer,
and the answer each must get back, byte for byte.

The kinds, in the order the clients take them (``MIX``):

- ``chat``, ``chat-sse``: Chat Completions bodies of 20 KB to 280 KB (each
  session cut to 20 and 100 KB, and whole), answered with JSON or an event
  stream; ``chat-gzip``: the same bodies gzip-compressed
  (``content-encoding: gzip``), JSON answer; ``chat-1.5mb``: 1.5 MB bodies
  (a session's tool turns repeated with fresh ids), event stream;
- ``anthropic``, ``anthropic-sse``, ``anthropic-gzip``: the Anthropic
  Messages sessions (``POST /v1/messages``), the last one compressed;
- ``claude-code``, ``claude-code-sse``: the same sessions as Claude Code
  sends them (``claude_code``: its tool definitions, its reminders, its
  two marked system blocks and its moving breakpoint on the last block);
- ``responses``, ``responses-sse``: the OpenAI Responses sessions
  (``POST /v1/responses``);
- ``mcp``, ``mcp-gateway``: a ``tools/call`` with a 1 KB answer, on the
  direct route (``POST /mcp``) and through obsmask's gateway
  (``/api/mcp-gateway/stub/rpc``); ``mcp-200k``, ``mcp-200k-gateway``: the
  same with a 200,000-character text, which obsmask cuts;
- ``bad-gzip`` (a chat body declared gzip, and not) and ``bad-json`` (not
  JSON): obsmask must pass them on byte for byte.

A proxy without the gateway (plain mitmproxy) sends the gateway's path on
to the stub, which answers it as ``/mcp``: every kind is the same request
through both proxies. Only the expected answer differs: with obsmask
(``cuts``), the 200,000-character text comes back as head + marker + tail,
computed here from the README's rule, not by obsmask's code."""

from __future__ import annotations

import functools
import gzip
import itertools
import json
from dataclasses import dataclass

from benchlib.load.agents import Agents, Conversation, first_item
from benchlib.load.bodies import Bodies
from benchlib.load.claude_code import ClaudeCodeConversation
from benchlib.load.stub import ANSWERS, mcp_answer

CHAT = "/v1/chat/completions"
ANTHROPIC = "/v1/messages"
RESPONSES = "/v1/responses"
GATEWAY = "/api/mcp-gateway/stub/rpc"
MCP_BIG_CHARS = 200_000
# obsmask's MCP cut with the shipped settings (README, "MCP truncation").
MAX_CHARS, HEAD_CHARS, TAIL_CHARS = 4000, 2000, 2000
MARKER = "\n... [OBSMASK_TRUNCATED original_chars={chars} head={head} tail={tail}] ...\n"

MIX = ["chat", "chat-sse", "anthropic", "mcp", "responses-sse", "chat-gzip", "mcp-200k",
       "anthropic-sse", "claude-code", "chat-1.5mb", "bad-gzip", "mcp-gateway", "responses",
       "mcp-200k-gateway", "anthropic-gzip", "claude-code-sse", "bad-json"]
# The kinds of each shape of conversation traffic, for the load phases of
# one shape at a time: a JSON answer and an event stream each, no gzip.
SHAPE_KINDS: dict[str, tuple[str, ...]] = {
    "chat": ("chat", "chat-sse"),
    "anthropic": ("anthropic", "anthropic-sse"),
    "responses": ("responses", "responses-sse"),
    "claude_code": ("claude-code", "claude-code-sse"),
}


@dataclass(frozen=True)
class Request:
    kind: str
    method: str
    path: str
    body: bytes
    headers: dict[str, str]
    expected: bytes


def jsonrpc_call(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                       "params": {"name": "read", "arguments": {"n": n}}}).encode()


def cut_mcp_answer(n: int, chars: int) -> bytes:
    """``mcp_answer(n, chars)`` as obsmask sends it on: its text cut to
    head + marker + tail in place, every other byte the stub's."""
    answer = json.loads(mcp_answer(n, chars))
    text: str = answer["result"]["content"][0]["text"]
    if len(text) > MAX_CHARS:
        marker = MARKER.format(chars=len(text), head=HEAD_CHARS, tail=TAIL_CHARS)
        answer["result"]["content"][0]["text"] = text[:HEAD_CHARS] + marker + text[-TAIL_CHARS:]
    return json.dumps(answer).encode()


def mcp_request(n: int, kind: str = "mcp", path: str = "/mcp", chars: int = 0,
                cuts: bool = False) -> Request:
    """A ``tools/call`` whose answer has a text of ``chars`` characters
    (about 1 KB when 0)."""
    query = f"?id={n}" + (f"&chars={chars}" if chars else "")
    expected = cut_mcp_answer(n, chars) if cuts and chars else mcp_answer(n, chars)
    return Request(kind, "POST", path + query, jsonrpc_call(n),
                   {"content-type": "application/json"}, expected)


def conversation_request(kind: str, path: str, n: int, body: bytes, sse: bool,
                         encoding: str | None = None, query: str = "") -> Request:
    """A POST of ``body`` to a conversation route, with the stub's answer
    of that route (``ANSWERS``), JSON or event stream; ``query`` is added to
    the path's (``&tag=...``)."""
    json_answer, events = ANSWERS[path.rsplit("/", 1)[-1]]
    headers = {"content-type": "application/json"}
    if encoding:
        headers["content-encoding"] = encoding
    expected = b"".join(events(n, 5)) if sse else json_answer(n)
    return Request(kind, "POST", f"{path}?id={n}" + ("&sse=1" if sse else "") + query, body,
                   headers, expected)


def numbered_body(body: bytes, n: int) -> bytes:
    """The JSON object ``body`` with a first member numbered ``n``: a body
    obsmask has not seen (neither a retry nor another conversation's)."""
    if body[:1] != b"{":
        raise ValueError("a conversation body is a JSON object")
    return b'{"bench_request": %d, ' % n + body[1:]


# How the mix's conversation bodies come (``bench_load.py --bodies``).
AGENTS, FRESH, REPEATED = "agents", "fresh", "repeated"
BODY_MODES = (AGENTS, FRESH, REPEATED)
# One client's requests, with agents: the next request of a conversation,
# ending at one of its last this many requests in turn (the model's answers
# move the masking frontier on some and not on others).
NEXT_REQUEST_STEPS = 16


class Mix:
    """The requests of the mix, for a proxy that ``cuts`` MCP answers
    (obsmask) or not (plain). Its conversation bodies come one of three
    ways (``mode``):

    - ``agents``: each client carries on conversations of its own, request
      after request, as agents do (``agents``): a request adds the model's
      answer and what followed to the one before;
    - ``fresh``: every body is one obsmask has not seen (``fresh_body``: a
      first member holding a number of its own, the rest one of the
      sessions' bodies), so each is read, planned, spliced and checked anew;
    - ``repeated``: the sessions' bodies again and again; sent again byte
      for byte, a body is a retry for obsmask, which comes to the first
      one's outcome without reading it.

    The speed phases' bodies are fresh in the first two modes, but for one
    client's chat requests with agents: each is the next request of a
    conversation whose previous request was sent just before, untimed
    (``next_request_pair``).
    ``clients`` and ``per_client`` tell which client sends request ``n``
    (``cases.run_load`` numbers them)."""

    def __init__(self, bodies: Bodies, cuts: bool, mode: str = REPEATED, clients: int = 1,
                 per_client: int = 1) -> None:
        if mode not in BODY_MODES:
            raise ValueError(f"bodies come {BODY_MODES}, not {mode!r}")
        self.bodies = bodies
        self.cuts = cuts
        self.mode = mode
        self.fresh = mode != REPEATED
        self.clients, self.per_client = clients, per_client
        self._serial = itertools.count()
        self._sized: dict[str, Conversation] = {}
        self.agents = Agents({
            "chat": [Conversation.of(body, "messages") for body in bodies.chat_whole],
            "chat_large": [Conversation.of(body, "messages") for body in bodies.chat_large],
            "anthropic": [Conversation.of(body, "messages") for body in bodies.anthropic],
            "responses": [Conversation.of(body, "input") for body in bodies.responses],
            "claude_code": [ClaudeCodeConversation(session)
                            for session in bodies.claude_code_sessions],
        }) if mode == AGENTS else None

    def next_request_pair(self, size: str) -> tuple[bytes, bytes]:
        """An agent's request and its next one (the model's answer and what
        followed added), from the conversation of the ``size`` body
        (``Bodies.chat_sized``): a conversation of its own each time,
        ending at one of its last ``NEXT_REQUEST_STEPS`` requests in turn."""
        conversation = self._sized.get(size)
        if conversation is None:
            conversation = self._sized[size] = Conversation.of(
                self.bodies.chat_sized[size], "messages")
        pair = next(self._serial)
        step = len(conversation.ends) - 1 - pair % NEXT_REQUEST_STEPS
        first = first_item(pair, f"one client, {size}")
        return conversation.request(step - 1, first), conversation.request(step, first)

    def fresh_body(self, body: bytes) -> bytes:
        """``body`` as it is, or when fresh one never sent before."""
        return numbered_body(body, next(self._serial)) if self.fresh else body

    def _conversation_body(self, kind: str, n: int, client: int | None, sessions: str,
                           bodies: list[bytes], compressed: list[bytes] | None = None) -> bytes:
        """The body of request ``n`` of ``kind``: an agent's next request,
        a fresh body or a repeated one (gzip-compressed when ``compressed``
        holds the repeated ones compressed). The agent is ``client``, or
        the client that sends request ``n`` when None."""
        if self.agents is not None:
            if client is None:
                client = (n // self.per_client) % self.clients
            body = self.agents.body(client, kind, sessions)
        elif compressed is not None and not self.fresh:
            return _pick(compressed, n)
        else:
            body = self.fresh_body(_pick(bodies, n))
        # Compressed per request at level 1: this process pays it.
        return gzip.compress(body, 1) if compressed is not None else body

    def request(self, n: int, turn: int, kinds: list[str] = MIX,
                client: int | None = None) -> Request:
        """Request ``n`` (its id and body), of the kind ``kinds[turn]``
        (modulo), sent by ``client`` (None: the client that sends request
        ``n`` in a round: ``cases.run_load`` numbers them)."""
        return self.of_kind(kinds[turn % len(kinds)], n, client)

    def of_kind(self, kind: str, n: int, client: int | None = None) -> Request:
        b = self.bodies
        body = functools.partial(self._conversation_body, kind, n, client)
        sse = kind.endswith("-sse") or kind == "chat-1.5mb"
        match kind:
            case "chat" | "chat-sse":
                return conversation_request(kind, CHAT, n, body("chat", b.chat), sse)
            case "chat-gzip":
                return conversation_request(kind, CHAT, n, body("chat", b.chat, b.chat_gzip),
                                            sse, "gzip")
            case "chat-1.5mb":
                return conversation_request(kind, CHAT, n, body("chat_large", b.chat_large),
                                            sse)
            case "anthropic" | "anthropic-sse":
                return conversation_request(kind, ANTHROPIC, n, body("anthropic", b.anthropic),
                                            sse)
            case "anthropic-gzip":
                return conversation_request(
                    kind, ANTHROPIC, n, body("anthropic", b.anthropic, b.anthropic_gzip), sse,
                    "gzip")
            case "claude-code" | "claude-code-sse":
                return conversation_request(
                    kind, ANTHROPIC, n, body("claude_code", b.claude_code), sse)
            case "responses" | "responses-sse":
                return conversation_request(kind, RESPONSES, n, body("responses", b.responses),
                                            sse)
            case "mcp":
                return mcp_request(n)
            case "mcp-gateway":
                return mcp_request(n, kind, GATEWAY)
            case "mcp-200k":
                return mcp_request(n, kind, "/mcp", MCP_BIG_CHARS, self.cuts)
            case "mcp-200k-gateway":
                return mcp_request(n, kind, GATEWAY, MCP_BIG_CHARS, self.cuts)
            case "bad-gzip":  # declared gzip, is not
                return conversation_request(kind, CHAT, n, _pick(b.chat, n), sse, "gzip")
            case "bad-json":
                return conversation_request(kind, CHAT, n, b'{"model": "x", "messages": [', sse)
        raise ValueError(kind)


def _pick(bodies: list[bytes], n: int) -> bytes:
    return bodies[n % len(bodies)]
