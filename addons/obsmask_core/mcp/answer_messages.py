"""The JSON-RPC messages of an MCP answer as the content view reads them
(``explain.py``): one message, the members of a batch, or those of each
event of an event stream; the strings inside each, by their place; and the
answer pretty-printed for a reader.

This reads an answer after the fact, for the page; it does not validate
JSON-RPC (``jsonrpc_scan`` does, for the cut).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from obsmask_core.shared.sse import SseLineSplitter, data_value
from obsmask_core.shared.view_text import pretty_body, pretty_json

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# A message of a body: (event number or None, the message).
Message = tuple[int | None, object]


def answer_messages(body: str, event_stream: bool) -> list[Message]:
    """The JSON-RPC messages of a body: one, the members of a batch, or
    those of each event of a stream (data that is not JSON is left out)."""
    if not event_stream:
        return [(None, message) for message in _messages_of(body)]
    return [(number, message) for number, data in enumerate(event_data(body), start=1)
            for message in _messages_of(data)]


def _messages_of(data: str) -> list[object]:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return []
    return list(value) if isinstance(value, list) else [value]


def event_data(body: str) -> list[str]:
    """The data of each event of an event stream (its ``data`` lines
    joined by newlines), in order; events without data are left out."""
    splitter = SseLineSplitter(eager_cr=True, comments=False)
    encoded = body.encode("utf-8", "surrogatepass")
    lines = [*splitter.feed(encoded), *splitter.finish(), splitter.take_rest()]
    events: list[str] = []
    data: list[bytes] = []
    for line in lines:
        content = line.rstrip(b"\r\n")
        if not content:
            if data:
                events.append(b"\n".join(data).decode("utf-8", "replace"))
            data = []
        elif (value := data_value(content)) is not None:
            data.append(value)
    if data:
        events.append(b"\n".join(data).decode("utf-8", "replace"))
    return events


def strings_of(value: object, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, string) of every string value inside ``value``, in order."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, member in value.items():
            step = f".{key}" if _NAME.match(str(key)) else f"[{json.dumps(key)}]"
            yield from strings_of(member, (path + step) if path else step.lstrip("."))
    elif isinstance(value, list):
        for position, member in enumerate(value):
            yield from strings_of(member, f"{path}[{position}]")


def message_id(message: object) -> str | None:
    """A message's id as JSON writes it; None when it has none."""
    if isinstance(message, dict) and "id" in message:
        return json.dumps(message["id"], ensure_ascii=False)
    return None


def pretty_answer(body: str, event_stream: bool) -> str:
    """A body pretty-printed: its JSON, or each event's data JSON under a
    ``data:`` line (other data as it is), events apart by a blank line."""
    if not event_stream:
        return pretty_body(body)
    events = []
    for data in event_data(body):
        pretty = pretty_json(data)
        events.append("data:\n" + pretty if pretty is not None else "data: " + data)
    return "\n\n".join(events)
