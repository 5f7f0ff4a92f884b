"""The request bodies bench_observation_masking_schema1 measures: a JSON
file or the POSTs of a .mitm file, their wire format, and a synthetic large
body made by repeating a history."""

from __future__ import annotations

import json
from pathlib import Path

from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from obsmask_core.offline.cache.sessions import ROUTE_SUFFIXES
from obsmask_core.offline.recorded_requests import post_bodies

__all__ = ["ROUTE_SUFFIXES", "format_of_document"]


def format_of_document(body: bytes) -> WireFormat:
    """Chat, Anthropic or Responses, from the shape of a request body."""
    try:
        document = json.loads(body)
    except ValueError:
        return CHAT
    if isinstance(document, dict) and isinstance(document.get("input"), list):
        return RESPONSES
    messages = document.get("messages") if isinstance(document, dict) else None
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in content
        ):
            return ANTHROPIC
    return CHAT


def read_request_bodies(path: Path) -> list[tuple[bytes, WireFormat]]:
    """One body for a JSON file; every POST to a masked route of a .mitm file."""
    if path.suffix != ".mitm":
        body = path.read_bytes()
        return [(body, format_of_document(body))]
    bodies = []
    for route, content in post_bodies(path):
        fmt = next((f for suffix, f in ROUTE_SUFFIXES if route.endswith(suffix)), None)
        if fmt is not None and content:
            bodies.append((content, fmt))
    return bodies


ID_FIELDS = ("id", "tool_call_id", "tool_use_id", "call_id")


def _suffix_ids(value: object, suffix: str) -> None:
    """Append ``suffix`` to every call id found in ``value`` (in place)."""
    pending = [value]
    while pending:
        current = pending.pop()
        if isinstance(current, dict):
            for key, inner in current.items():
                if key in ID_FIELDS and isinstance(inner, str):
                    current[key] = inner + suffix
                else:
                    pending.append(inner)
        elif isinstance(current, list):
            pending.extend(current)


def repeat_history(body: bytes, fmt: WireFormat, times: int) -> bytes:
    """A synthetic large request: the conversation repeated ``times`` times,
    each copy with its own call ids (so it is as many tool turns again). A
    body that is not such a request is returned as it is."""
    try:
        document = json.loads(body)
    except ValueError:
        return body
    if not isinstance(document, dict) or not isinstance(document.get(fmt.list_member), list):
        return body
    items = []
    for copy_number in range(times):
        copied = json.loads(json.dumps(document[fmt.list_member]))
        _suffix_ids(copied, f"_{copy_number}")
        items.extend(copied)
    return json.dumps({**document, fmt.list_member: items}).encode()
