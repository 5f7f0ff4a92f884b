"""A plain reader of server-sent events, as a client dispatches them: the
reference the tests hold obsmask's stream rewriting against."""

from __future__ import annotations

import re


def sse_events(stream: bytes) -> list[tuple[str, str, str]]:
    """(type, data, last id) of each dispatched event, by the WHATWG rules:
    lines end in \\r\\n, \\r or \\n; a blank line dispatches the event if it has
    data; data lines are joined with \\n; one space after the colon is not
    part of the value; a leading byte order mark is ignored."""
    text = stream.decode("utf-8", errors="replace").removeprefix("\ufeff")
    events: list[tuple[str, str, str]] = []
    data: list[str] = []
    event_type, last_id = "", ""
    for line in re.split(r"\r\n|\r|\n", text)[:-1]:  # the last piece is an unended line
        if not line:
            if data:
                events.append((event_type or "message", "\n".join(data), last_id))
            data, event_type = [], ""
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data.append(value)
            elif name == "event":
                event_type = value
            elif name == "id" and "\0" not in value:
                last_id = value
    return events
