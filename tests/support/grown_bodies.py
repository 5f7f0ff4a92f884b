"""Chat bodies grown by items, for the tests of the fast path's proven spans:
a kept start (``KEPT``), the items added after it, and the spans a second
read proves in them."""

from __future__ import annotations

import orjson

from obsmask_core.conversation.reuse.proven_spans import candidates, prove_added
from obsmask_core.conversation.turns.wire_formats import CHAT

KEPT = [{"role": "user", "content": "go"}]


def grown(added: list[object], write=orjson.dumps) -> tuple[bytes, int, int]:
    """A Chat body of KEPT then ``added``, and where the added bytes lie."""
    kept = write({"messages": KEPT, "model": "m"})
    end = kept.index(b"]", kept.index(b'"messages"'))
    inserted = b"".join(b"," + write(item) for item in added)
    return kept[:end] + inserted + kept[end:], end, end + len(inserted)


def chat_turn(call_id: str, output: str) -> list[object]:
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": output}]


def proven_chat(added: list[object], write=orjson.dumps) -> tuple[bytes, dict]:
    body, start, end = grown(added, write)
    items = [*KEPT, *added]
    wanted = candidates(added, len(KEPT), CHAT.index(items), CHAT)
    return body, prove_added(body, start, end, added, len(KEPT), wanted)
