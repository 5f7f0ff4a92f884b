"""The MCP gateway routes: ``/api/mcp-gateway/{server_name}/rpc`` -> a server.

Seed 004: the gateway receives JSON-RPC from the IDE, forwards it to the
local MCP server named in the path, and answers with the (truncated)
response; "si serveur MCP indisponible/timeout -> réponse JSON-RPC error
(code dédié) + message clair", and the same for an answer that is not
JSON-RPC. mitmproxy answers an unreachable upstream with an HTML 502 page
and never times out a silent one, so the gateway talks to the upstream
itself (one HTTP/1.1 exchange, with h11) for the requests that get one
answer (POST, DELETE), and checks that the upstream accepts connections
before handing a GET stream to mitmproxy.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import h11

from obsmask_core.jsonrpc_truncation import scan_jsonrpc
from obsmask_core.policy import PolicyError

# JSON-RPC error codes of the gateway: in the -32000..-32099 range that
# JSON-RPC leaves to implementations, clear of the codes MCP and its SDKs use
# (-32000 connection closed, -32001 request timeout, -32002 resource not
# found, -32042 URL elicitation required).
UNKNOWN_SERVER = -32051  # no server of that name in [mcp_gateway.servers]
UPSTREAM_UNREACHABLE = -32052  # connection refused, unknown host, TLS failure
UPSTREAM_TIMEOUT = -32053  # no byte from the server for timeout_seconds
UPSTREAM_INVALID = -32054  # the answer is not HTTP, or not JSON-RPC
ERROR_HTTP_STATUS = {
    UNKNOWN_SERVER: 404,
    UPSTREAM_UNREACHABLE: 502,
    UPSTREAM_TIMEOUT: 504,
    UPSTREAM_INVALID: 502,
}

GATEWAY_PATH = re.compile(r"^/api/mcp-gateway/([^/?#]+)/rpc/?(?:\?.*)?$")
DEFAULT_TIMEOUT_SECONDS = 300
# The most the gateway reads from one answer (it holds it to check it).
MAX_ANSWER_BYTES = 256 << 20
_READ_SIZE = 1 << 16
# Hop-by-hop headers (RFC 9110 7.6.1) and those the exchange sets itself.
_NOT_FORWARDED = frozenset({
    "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te",
    "trailer", "transfer-encoding", "upgrade", "host", "content-length",
    "accept-encoding",
})


def check_gateway_value(key: str, value: object) -> None:
    """A key of ``[mcp_gateway]`` itself (not of its sub-tables)."""
    if key != "timeout_seconds":
        raise PolicyError(key, "unknown key (the keys are timeout_seconds, and the "
                               "tables [mcp_gateway.masking] and [mcp_gateway.servers])")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PolicyError(key, "must be a whole number of seconds, at least 1")


@dataclass(frozen=True)
class Upstream:
    """A server of ``[mcp_gateway.servers]``."""

    name: str
    url: str
    scheme: str
    host: str
    port: int
    target: str  # path and query posted to ("/" for a bare base URL)

    @property
    def authority(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def parse_upstream(name: str, url: str) -> Upstream:
    """Raise PolicyError unless ``url`` is an http(s) URL with a host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise PolicyError(name, f"not a URL ({e})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PolicyError(name, f"{url!r} is not an http:// or https:// URL with a host")
    if not re.fullmatch(r"[A-Za-z0-9._~-]+", name):
        raise PolicyError(name, "a server name may hold letters, digits and . _ ~ - only")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    default = 443 if parts.scheme == "https" else 80
    return Upstream(name, url, parts.scheme, parts.hostname, port or default, target)


def check_server_url(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise PolicyError(name, "must be a URL string")
    parse_upstream(name, value)


def gateway_server_name(path: str) -> str | None:
    """The server name of a gateway path, or None for any other path."""
    found = GATEWAY_PATH.match(path)
    return unquote(found.group(1)) if found else None


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


class GatewayFailure(Exception):
    """The upstream could not give an answer; ``code`` is one of the above."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class UpstreamAnswer:
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes


def _ssl_context(upstream: Upstream) -> ssl.SSLContext | None:
    return ssl.create_default_context() if upstream.scheme == "https" else None


async def _connect(
    upstream: Upstream, timeout: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    try:
        return await asyncio.wait_for(
            asyncio.open_connection(upstream.host, upstream.port, ssl=_ssl_context(upstream)),
            timeout,
        )
    except TimeoutError:
        raise GatewayFailure(
            UPSTREAM_TIMEOUT,
            f"{upstream.url} did not accept a connection within {timeout:g} s",
        ) from None
    except OSError as e:  # refused, unknown host, TLS (ssl.SSLError is an OSError)
        reason = e.strerror or str(e) or type(e).__name__
        raise GatewayFailure(
            UPSTREAM_UNREACHABLE, f"cannot connect to {upstream.url}: {reason}"
        ) from None


async def check_reachable(upstream: Upstream, timeout: float) -> None:
    """Raise GatewayFailure unless the upstream accepts a connection."""
    _reader, writer = await _connect(upstream, timeout)
    writer.close()


async def exchange(
    upstream: Upstream,
    method: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    timeout: float,
) -> UpstreamAnswer:
    """Send one request to the upstream and read its whole answer.

    ``timeout`` bounds the connection and every wait for the next bytes of
    the answer: a server that stays silent that long is given up on, a slow
    one that keeps sending (SSE pings, say) is not.
    """
    reader, writer = await _connect(upstream, timeout)
    try:
        connection = h11.Connection(h11.CLIENT, max_incomplete_event_size=1 << 20)
        sent = [
            (name, value) for name, value in headers
            if name.lower().decode("latin-1") not in _NOT_FORWARDED
        ]
        sent.insert(0, (b"host", upstream.authority.encode("idna")))
        sent.append((b"content-length", str(len(body)).encode()))
        # The gateway holds the answer to check it: no need to compress it.
        sent.append((b"accept-encoding", b"identity"))
        data = connection.send(h11.Request(method=method, target=upstream.target, headers=sent))
        if body:
            data += connection.send(h11.Data(data=body))
        data += connection.send(h11.EndOfMessage())
        writer.write(data)
        await writer.drain()

        response: h11.Response | None = None
        pieces: list[bytes] = []
        size = 0
        while True:
            try:
                event = connection.next_event()
            except h11.RemoteProtocolError as e:
                raise GatewayFailure(
                    UPSTREAM_INVALID, f"{upstream.url} did not answer with valid HTTP ({e})"
                ) from None
            if event is h11.NEED_DATA:
                try:
                    received = await asyncio.wait_for(reader.read(_READ_SIZE), timeout)
                except TimeoutError:
                    waited = "to answer" if response is None else "to finish its answer"
                    raise GatewayFailure(
                        UPSTREAM_TIMEOUT,
                        f"{upstream.url} took more than {timeout:g} s {waited}",
                    ) from None
                except OSError as e:
                    raise GatewayFailure(
                        UPSTREAM_UNREACHABLE,
                        f"the connection to {upstream.url} broke: {e.strerror or e}",
                    ) from None
                connection.receive_data(received)
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > MAX_ANSWER_BYTES:
                    raise GatewayFailure(
                        UPSTREAM_INVALID,
                        f"{upstream.url} answered more than {MAX_ANSWER_BYTES:,} bytes",
                    )
                pieces.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                break
            # InformationalResponse (1xx): wait for the final answer.
        if response is None:
            raise GatewayFailure(
                UPSTREAM_INVALID, f"{upstream.url} closed the connection without answering"
            )
        kept = [
            (name, value) for name, value in response.headers
            if name.decode("latin-1") not in ("connection", "keep-alive", "transfer-encoding",
                                               "content-length")
        ]
        return UpstreamAnswer(response.status_code, bytes(response.reason), kept,
                              b"".join(pieces))
    finally:
        writer.close()
