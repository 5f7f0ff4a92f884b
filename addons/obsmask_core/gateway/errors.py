"""The gateway's failures, as the JSON-RPC errors its clients receive.

An upstream that cannot be reached, that stays silent or that answers with
something other than JSON-RPC becomes a JSON-RPC error with a code of its own
and a clear message, never an HTML page or a hung request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from obsmask_core.mcp.jsonrpc_scan import scan_jsonrpc

# JSON-RPC error codes of the gateway: in the -32000..-32099 range that
# JSON-RPC leaves to implementations, clear of the codes MCP and its SDKs use
# (-32000 connection closed, -32001 request timeout, -32002 resource not
# found, -32042 URL elicitation required).
UNKNOWN_SERVER = -32051  # no server of that name in [mcp_gateway.servers]
UPSTREAM_UNREACHABLE = -32052  # connection refused, unknown host, TLS failure
UPSTREAM_TIMEOUT = -32053  # no byte from the server for timeout_seconds
UPSTREAM_INVALID = -32054  # the answer is not HTTP, or not JSON-RPC
GATEWAY_INTERNAL = -32055  # a bug of ours; the log has the details
CLIENT_NOT_ALLOWED = -32056  # a client outside the loopback and allow_clients
ERROR_HTTP_STATUS: Mapping[int, int] = MappingProxyType({
    CLIENT_NOT_ALLOWED: 403,
    GATEWAY_INTERNAL: 500,
    UNKNOWN_SERVER: 404,
    UPSTREAM_UNREACHABLE: 502,
    UPSTREAM_TIMEOUT: 504,
    UPSTREAM_INVALID: 502,
})


class GatewayFailure(Exception):
    """The upstream could not give an answer; ``code`` is one of the above."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ErrorResponse:
    """The HTTP answer that carries a gateway failure to the client."""

    status: int
    body: bytes
    message: str


def error_response(id_text: str | None, failure: GatewayFailure, server: str) -> ErrorResponse:
    """The answer to a request that failed: a JSON-RPC error echoing the
    request's id. HTTP 200 when the request had an id (the client reads the
    error from the body, as from any JSON-RPC answer); without one (a
    notification, a GET stream, a DELETE) the HTTP status is all the client
    looks at, so it says what went wrong."""
    message = f"obsmask gateway: {failure.message}"
    status = 200 if id_text is not None else ERROR_HTTP_STATUS[failure.code]
    return ErrorResponse(status, error_body(id_text, failure.code, message, {"server": server}),
                         message)


def request_id_text(body: bytes) -> str | None:
    """The id of a JSON-RPC request body as written (``7``, ``"abc"``), or
    None when the body is not one request (a notification, a batch, junk)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    scan = scan_jsonrpc(text)
    if scan.problem is not None or scan.batch or len(scan.messages) != 1:
        return None
    message = scan.messages[0]
    return message.id_text if message.kind == "request" else None


def error_body(id_text: str | None, code: int, message: str, data: dict[str, object]) -> bytes:
    """A JSON-RPC 2.0 error response; the id is echoed as the client wrote it."""
    error = json.dumps({"code": code, "message": message, "data": data}, ensure_ascii=False)
    return (
        '{"jsonrpc": "2.0", "id": ' + (id_text if id_text is not None else "null")
        + ', "error": ' + error + "}"
    ).encode("utf-8")
