"""The request bodies of the load benchmark, made from the real agent
sessions of fixtures/sessions/{chat,anthropic,responses}/ (ten of each, the
last request of each session, 60-280 KB), and the Anthropic ones as Claude
Code sends them (``claude_code``: 130-350 KB).

A Chat Completions body of another size is one of these sessions with its
message list cut or grown, and still a valid request: cut after a whole
tool turn (an assistant message with ``tool_calls`` and the ``tool``
messages that answer it), or grown by repeating the session's tool turns,
each copy with fresh ``tool_call`` ids, so that every id is called once and
answered once. Either way the list ends with tool results, as an agent's
request does after it ran its tools."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from benchlib.current_models import SHAPE_MODELS, named
from benchlib.load.claude_code import claude_code_of, last_request
from obsmask_core.offline.cache.sessions import Session

KB = 1000
MB = 1000 * KB

Message = dict[str, object]


def _units(messages: list[Message]) -> tuple[list[Message], list[list[Message]]]:
    """The messages before the first assistant message, and the rest in
    units: an assistant message with the tool messages after it, or any
    other message alone."""
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"),
                 len(messages))
    units: list[list[Message]] = []
    for message in messages[first:]:
        if message.get("role") == "tool" and units and units[-1][0].get("role") == "assistant":
            units[-1].append(message)
        else:
            units.append([message])
    return messages[:first], units


def _calls(message: Message) -> list[Message]:
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _is_tool_turn(unit: list[Message]) -> bool:
    calls = _calls(unit[0])
    return unit[0].get("role") == "assistant" and bool(calls) and len(unit) == 1 + len(calls)


def _size(messages: list[Message]) -> int:
    return sum(len(json.dumps(m)) + 2 for m in messages)


def _fresh_ids(unit: list[Message], copy: int) -> list[Message]:
    """A copy of a tool turn whose call ids are new (``<id>-r<copy>``)."""
    assistant = {**unit[0], "tool_calls": [{**call, "id": f"{call['id']}-r{copy}"}
                                           for call in _calls(unit[0])]}
    tools = [{**m, "tool_call_id": f"{m['tool_call_id']}-r{copy}"} for m in unit[1:]]
    return [assistant, *tools]


def chat_body(session: bytes, size: int) -> bytes:
    """The Chat Completions request ``session`` cut or grown to about
    ``size`` bytes (at most ``size`` when cut; at least ``size`` when grown),
    ending after a whole tool turn."""
    request = json.loads(session)
    head, units = _units([m for m in request["messages"] if isinstance(m, dict)])
    turns = [unit for unit in units if _is_tool_turn(unit)]
    if not turns:
        raise ValueError("a session without a tool turn")
    fixed = len(session) - _size(head) - sum(_size(unit) for unit in units)
    messages = list(head)
    total = fixed + _size(messages)
    kept: list[Message] = []
    for unit in units:  # cut: whole units while they fit
        unit_size = _size(unit)
        if total + unit_size > size:
            break
        messages += unit
        total += unit_size
        if _is_tool_turn(unit):
            kept = list(messages)
    else:  # the whole session fits: grow it
        copy = 0
        while total < size:
            copy += 1
            for unit in turns:
                fresh = _fresh_ids(unit, copy)
                messages += fresh
                total += _size(fresh)
                if total >= size:
                    break
        kept = messages
    if not kept:
        raise ValueError(f"no tool turn fits in {size} bytes")
    return json.dumps({**request, "messages": kept}).encode()


@dataclass(frozen=True)
class Bodies:
    """Every body the benchmark sends, built once."""

    chat: list[bytes]  # 20 KB to 280 KB: each session cut to 20 and 100 KB, and whole
    chat_whole: list[bytes]  # the sessions themselves
    chat_sized: dict[str, bytes]  # "100 KB", "280 KB", "1.5 MB", "10 MB": one each
    chat_large: list[bytes]  # 1.5 MB, one per session
    anthropic: list[bytes]
    responses: list[bytes]
    chat_gzip: list[bytes]  # ``chat``, gzip-compressed
    anthropic_gzip: list[bytes]
    # The Anthropic sessions as Claude Code sends them, and their last requests.
    claude_code_sessions: list[Session]
    claude_code: list[bytes]
    sessions: dict[str, int]  # how many of each format (and of claude_code)


def _sessions(folder: Path, model: str | None) -> list[bytes]:
    return [named(path.read_bytes(), model) for path in sorted(folder.glob("*.json"))]


def build_bodies(sessions_folder: Path,
                 models: Mapping[str, str | None] = SHAPE_MODELS) -> Bodies:
    """The bodies, from fixtures/sessions/ (``sessions_folder``), each shape
    to its model of ``models`` (``current_models``; None or missing: the
    session's own)."""
    chat = _sessions(sessions_folder / "chat", models.get("chat"))
    anthropic = _sessions(sessions_folder / "anthropic", models.get("anthropic"))
    responses = _sessions(sessions_folder / "responses", models.get("responses"))
    if not (chat and anthropic and responses):
        raise ValueError(f"no sessions in {sessions_folder}/{{chat,anthropic,responses}}")
    mixed: list[bytes] = []
    for session in chat:
        mixed += [chat_body(session, 20 * KB), chat_body(session, 100 * KB), session]
    largest = max(chat, key=len)
    sized = {
        "100 KB": chat_body(largest, 100 * KB),
        "280 KB": largest,
        "1.5 MB": chat_body(largest, 1500 * KB),
        "10 MB": chat_body(largest, 10 * MB),
    }
    chat_large = [chat_body(session, 1500 * KB) for session in chat]
    claude_code = claude_code_of(sessions_folder, models.get("claude_code"))
    return Bodies(
        chat=mixed, chat_whole=chat, chat_sized=sized, chat_large=chat_large, anthropic=anthropic,
        responses=responses,
        chat_gzip=[gzip.compress(body, 6) for body in mixed],
        anthropic_gzip=[gzip.compress(body, 6) for body in anthropic],
        claude_code_sessions=claude_code,
        claude_code=[last_request(session) for session in claude_code],
        sessions={"chat": len(chat), "anthropic": len(anthropic), "responses": len(responses),
                  "claude_code": len(claude_code)},
    )
