"""Asking an MCP server for the relay: the client's request sent on, the
head of the server's answer, and a buffered answer read whole and checked
(an event stream is passed on as it comes: ``gateway.relay_answers``)."""

from __future__ import annotations

from dataclasses import dataclass

import h11

from obsmask_core.gateway.errors import UPSTREAM_INVALID, GatewayFailure
from obsmask_core.gateway.exchange import bounded, event_bytes, header_value, next_event
from obsmask_core.gateway.headers import OURS
from obsmask_core.gateway.pool import UpstreamConnection
from obsmask_core.gateway.upstreams import Upstream
from obsmask_core.mcp.jsonrpc_check import reads_as_jsonrpc

# The most the gateway reads from one answer (it holds it to check it).
MAX_ANSWER_BYTES = 256 << 20
# Hop-by-hop headers (RFC 9110 7.6.1) and those the exchange sets itself.
NOT_FORWARDED = frozenset({
    "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te",
    "trailer", "transfer-encoding", "upgrade", "host", "content-length",
    "accept-encoding",
})
# Where the MCP SDKs' Streamable HTTP servers answer, named when a server says 404.
SDK_PATH = "/mcp"


@dataclass(frozen=True)
class Answer:
    """A buffered answer of a server, for the gateway addon to give the client."""

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes


def answer_problem(status: int, content_type: str, body: bytes) -> str | None:
    """Why an answer to a JSON-RPC POST cannot go to the client, or None.

    An empty answer (202 to a notification), a JSON-RPC body (errors with
    4xx statuses included: the client needs a 404 to see its session end)
    and an event stream are fine; an HTML error page is not.
    """
    if not body.strip():
        return None if status < 400 else f"HTTP {status} with no body"
    if reads_as_jsonrpc(body):
        return None
    return f"HTTP {status} with {content_type or 'no content type'}, not JSON-RPC"


def is_event_stream(response: h11.Response) -> bool:
    return (header_value(response.headers, "content-type").lower().startswith("text/event-stream")
            and response.status_code < 400)


def outgoing(method: bytes, query: bytes, headers: list[tuple[bytes, bytes]], body: bytes,
             upstream: Upstream) -> h11.Request:
    """The request to ``upstream``: the client's method, query string (an
    API key, say) and headers but the hop-by-hop ones and ours."""
    target = upstream.target.encode("ascii")
    if query:
        target += (b"&" if b"?" in target else b"?") + query
    sent = [(n, v) for n, v in headers
            if n.decode("latin-1").lower() not in NOT_FORWARDED and n.lower() not in OURS]
    sent.insert(0, (b"host", upstream.authority.encode("idna")))
    sent.append((b"content-length", str(len(body)).encode()))
    # The gateway reads buffered answers to check them: no compression.
    sent.append((b"accept-encoding", b"identity"))
    return h11.Request(method=method, target=target, headers=sent)


def answer_headers(response: h11.Response) -> list[tuple[bytes, bytes]]:
    """The server's headers but those of its connection and framing."""
    return [(n, v) for n, v in response.headers
            if n.decode("latin-1") not in ("connection", "keep-alive", "transfer-encoding",
                                           "content-length")]


async def send(server: UpstreamConnection, request: h11.Request, body: bytes,
               upstream: Upstream, timeout: float) -> h11.Response:
    """Send the request on ``server`` and read the head of its answer."""
    http = server.http
    data = event_bytes(http, request)
    data += event_bytes(http, h11.Data(data=body)) if body else b""
    data += event_bytes(http, h11.EndOfMessage())
    server.writer.write(data)
    await bounded(server.writer.drain(), timeout, upstream, "to take the request")
    while True:
        event = await next_event(http, server.read, timeout, upstream, "to answer")
        if isinstance(event, h11.Response):
            return event
        if not isinstance(event, h11.InformationalResponse):
            raise GatewayFailure(UPSTREAM_INVALID,
                                 f"{upstream.url} closed the connection without answering")


async def buffered_answer(server: UpstreamConnection, method: bytes, response: h11.Response,
                          upstream: Upstream, timeout: float) -> bytes:
    """The whole body of a buffered answer, read within ``timeout`` s, no
    bigger than MAX_ANSWER_BYTES, and (to a POST) one a client can read."""
    pieces: list[bytes] = []
    size = 0
    while True:
        event = await next_event(server.http, server.read, timeout, upstream,
                                 "to finish its answer")
        if isinstance(event, h11.Data):
            size += len(event.data)
            if size > MAX_ANSWER_BYTES:
                raise GatewayFailure(UPSTREAM_INVALID, f"{upstream.url} answered more "
                                     f"than {MAX_ANSWER_BYTES:,} bytes")
            pieces.append(bytes(event.data))
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            break
    answer = b"".join(pieces)
    if method == b"POST":
        content_type = header_value(response.headers, "content-type")
        problem = answer_problem(response.status_code, content_type, answer)
        if problem is not None:
            if response.status_code == 404:
                problem += (f"; the MCP SDKs serve {SDK_PATH}: is the URL in "
                            "[mcp_gateway.servers] missing its path?")
            raise GatewayFailure(UPSTREAM_INVALID, f"{upstream.url} answered {problem}")
    return answer
