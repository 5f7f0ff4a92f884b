"""Whether a body is JSON-RPC 2.0, answered quickly: the gateway asks it of
every answer it relays, most of them one response or a batch of them."""

from __future__ import annotations

import orjson

from obsmask_core.mcp.jsonrpc_scan import scan_jsonrpc


def reads_as_jsonrpc(body: bytes) -> bool:
    """Whether ``body`` is a JSON-RPC 2.0 message or batch: whether
    scan_jsonrpc finds no problem in it (UTF-8). The common answer (one
    response, or a batch of them) gets a quick yes from orjson, whose JSON is
    the strict JSON the scan reads; anything else is scanned."""
    # Without \\u escapes, a member name or "2.0" reads as it is written, as
    # the scan compares them.
    if b"\\u" not in body:
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            value = None
        messages = value if isinstance(value, list) else [value]
        if messages and all(_plain_response(message) for message in messages):
            return True
    try:
        return scan_jsonrpc(body.decode("utf-8")).problem is None
    except UnicodeDecodeError:
        return False


def _plain_response(message: object) -> bool:
    """A response as the scan would judge one (its kind: ``jsonrpc`` is
    "2.0", an ``id`` that is no container, one of ``result`` and ``error``,
    no ``method``); with a member written twice, orjson keeps the last, so a
    yes here is a yes of the scan too."""
    return (isinstance(message, dict) and message.get("jsonrpc") == "2.0"
            and "method" not in message and "id" in message
            and not isinstance(message["id"], dict | list)
            and ("result" in message) != ("error" in message))
