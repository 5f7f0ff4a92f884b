"""The sessions bench_rewrite replays, per shape of traffic: every request of
a conversation, in order, byte for byte as its client sends it.

- ``chat``, ``anthropic``, ``responses``: a real session's last request
  (fixtures/sessions/<format>/), and each of its requests the same body
  cut before one of the model's answers (``cut_requests``): the items up to
  there, then the bytes that close the list and follow it, as written in
  the file (an agent writes its history the same way every time);
- ``claude_code``: an Anthropic session as Claude Code sends it
  (``benchlib.cache.claude_code``: its twelve tool definitions, about
  48 kB; its ``<system-reminder>`` messages, which stay in the history;
  its two marked system blocks), each request written by
  ``ClientRequests(session).request(end)``: the moving breakpoint on the
  last block of *that* request, so the next request is the previous one
  with its breakpoint moved to the new last block, and items added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchlib.cache.claude_code import claude_code_session
from benchlib.current_models import SHAPE_MODELS, named
from obsmask_core.conversation.body.request_text import parse_request
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, FORMATS, WireFormat
from obsmask_core.offline.cache.clients import ClientRequests
from obsmask_core.offline.cache.sessions import Session, body_session
from obsmask_core.shared.json_text import skip_whitespace

CLAUDE_CODE = "claude_code"
SHAPES = (*FORMATS, CLAUDE_CODE)  # chat, anthropic, responses, claude_code


@dataclass(frozen=True)
class ShapedSession:
    """One session of one shape: ``requests`` in order, the last the whole
    conversation."""

    shape: str
    name: str  # "<shape>/<file name>"
    fmt: WireFormat
    requests: list[bytes]

    @property
    def body(self) -> bytes:
        return self.requests[-1]

    @property
    def previous(self) -> bytes | None:
        return self.requests[-2] if len(self.requests) > 1 else None


def cut_requests(body: bytes, fmt: WireFormat) -> list[bytes]:
    """Every request of the conversation that ends with ``body``, in order:
    its items up to each answer of the model, then all of them; byte for
    byte as the client wrote them."""
    request = parse_request(body.decode("utf-8"), fmt.list_member)
    text = request.text
    close = skip_whitespace(text, request.item_spans[-1][1])
    cuts = [start for start in fmt.index(request.items).answer_starts if start > 0]
    return [(text[:request.item_spans[cut - 1][1]] + text[close:]).encode("utf-8")
            for cut in cuts] + [body]


def claude_code_requests(session: Session, model: str | None = None) -> list[bytes]:
    """Every request of a Claude Code-shaped session, as Claude Code sends
    each (``ClientRequests``: its breakpoint on that request's last block),
    to ``model`` (None: the session's own)."""
    client = ClientRequests(session, model)
    return [client.request(end).body for end in session.request_ends]


def claude_code_of(path: Path, number: int) -> Session:
    """The Anthropic session of ``path`` as Claude Code sends it (``number``:
    its place among the Anthropic sessions, which seeds its reminders, as
    bench_cache numbers them)."""
    real = body_session(path, f"anthropic/{path.stem}", "real")
    if real.fmt is not ANTHROPIC:
        raise ValueError(f"{path}: not an Anthropic Messages body")
    return claude_code_session(real, number)


def file_format(path: Path) -> WireFormat:
    """The format a body's folder names (chat, anthropic, responses; chat
    otherwise)."""
    return FORMATS.get(path.parent.name, FORMATS["chat"])


def shaped_sessions(paths: Sequence[Path], shapes: Sequence[str] = SHAPES,
                    models: Mapping[str, str | None] = SHAPE_MODELS,
                    ) -> list[ShapedSession]:
    """The sessions of ``paths`` in each of ``shapes``: a body in the shape
    of its format, and each Anthropic body also as Claude Code sends it
    (after all of them); each shape's requests to its model of ``models``
    (``current_models``; None or missing: the session's own)."""
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        raise ValueError(f"shapes are {', '.join(SHAPES)}, not {', '.join(sorted(unknown))}")
    sessions = []
    for path in paths:
        fmt = file_format(path)
        if fmt.name in shapes:
            body = named(path.read_bytes(), models.get(fmt.name))
            sessions.append(ShapedSession(fmt.name, f"{fmt.name}/{path.name}", fmt,
                                          cut_requests(body, fmt)))
    if CLAUDE_CODE in shapes:
        anthropic = [path for path in paths if file_format(path) is ANTHROPIC]
        for number, path in enumerate(anthropic):
            sessions.append(ShapedSession(CLAUDE_CODE, f"{CLAUDE_CODE}/{path.name}", ANTHROPIC,
                                          claude_code_requests(claude_code_of(path, number),
                                                               models.get(CLAUDE_CODE))))
    return sessions
