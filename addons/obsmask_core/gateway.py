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
import logging
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import h11

from obsmask_core.jsonrpc_truncation import scan_jsonrpc
from obsmask_core.policy import PolicyError

logger = logging.getLogger(__name__)

# JSON-RPC error codes of the gateway: in the -32000..-32099 range that
# JSON-RPC leaves to implementations, clear of the codes MCP and its SDKs use
# (-32000 connection closed, -32001 request timeout, -32002 resource not
# found, -32042 URL elicitation required).
UNKNOWN_SERVER = -32051  # no server of that name in [mcp_gateway.servers]
UPSTREAM_UNREACHABLE = -32052  # connection refused, unknown host, TLS failure
UPSTREAM_TIMEOUT = -32053  # no byte from the server for timeout_seconds
UPSTREAM_INVALID = -32054  # the answer is not HTTP, or not JSON-RPC
GATEWAY_INTERNAL = -32055  # a bug of ours; the log has the details
ERROR_HTTP_STATUS = {
    GATEWAY_INTERNAL: 500,
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
    if parts.username is not None or parts.password is not None:
        raise PolicyError(name, "no user:password@ in the URL (it would show in logs and "
                                "errors); put credentials in headers the client sends")
    if port == 0:
        raise PolicyError(name, f"{url!r} has port 0")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if not re.fullmatch(r"[\x21-\x7e]+", target):
        raise PolicyError(name, f"{url!r}: the path must be ASCII without spaces "
                                "(percent-encode the rest)")
    default = 443 if parts.scheme == "https" else 80
    upstream = Upstream(name, url, parts.scheme, parts.hostname, port or default, target)
    try:
        upstream.authority.encode("idna")
    except UnicodeError as e:
        raise PolicyError(name, f"{url!r}: not a valid host name ({e})") from None
    return upstream


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


RELAY_HEADER = "x-obsmask-gateway-server"  # request: which server (mitmproxy -> relay)
ERROR_HEADER = "x-obsmask-gateway-error"  # answer: the code of a failure (relay -> addon)


def answer_problem(status: int, content_type: str, body: bytes) -> str | None:
    """Why an answer to a JSON-RPC POST cannot go to the client, or None.

    An empty answer (202 to a notification), a JSON-RPC body (errors with
    4xx statuses included: the client needs a 404 to see its session end)
    and an event stream are fine; an HTML error page is not.
    """
    if not body.strip():
        return None if status < 400 else f"HTTP {status} with no body"
    try:
        scan = scan_jsonrpc(body.decode("utf-8"))
    except UnicodeDecodeError:
        scan = None
    if scan is not None and scan.problem is None:
        return None
    return f"HTTP {status} with {content_type or 'no content type'}, not JSON-RPC"


class GatewayRelay:
    """A local HTTP/1.1 server that mitmproxy forwards the gateway's flows to.

    mitmproxy answers an unreachable upstream with an HTML 502 page and waits
    for a silent one for ever, and an addon cannot stream a body it makes
    itself. So the relay, on 127.0.0.1, talks to the real server: a failure
    becomes a JSON-RPC error (seed 004's "code dédié"), an event stream is
    passed on as it arrives (a server's elicitation or sampling request in
    the middle of a tool call must reach the client before the call ends),
    and mitmproxy sees an ordinary answer that the addon cuts as usual.
    """

    def __init__(self, servers: Callable[[], dict[str, Upstream]],
                 timeout: Callable[[], float]) -> None:
        self._servers = servers
        self._timeout = timeout
        self._server: asyncio.Server | None = None
        self._starting = asyncio.Lock()
        self.port = 0

    async def ensure_started(self) -> int:
        async with self._starting:
            if self._server is None:
                self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
                self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = h11.Connection(h11.SERVER)
        id_text: str | None = None
        name = ""
        try:
            request, body = await _read_request(client, reader, self._timeout())
            if request.method == b"POST":
                id_text = request_id_text(body)
            name = _header(request.headers, RELAY_HEADER)
            upstream = self._servers().get(name)
            if upstream is None:
                raise GatewayFailure(UNKNOWN_SERVER, f"no MCP server named {name!r}")
            await self._relay(client, writer, request, body, upstream, id_text)
        except GatewayFailure as failure:
            await _send_error(client, writer, id_text, failure, name)
        except Exception as e:  # the client gets an answer whatever happens
            logger.exception("obsmask: gateway relay: internal error")
            if client.our_state is h11.SEND_RESPONSE:
                await _send_error(client, writer, id_text, GatewayFailure(
                    GATEWAY_INTERNAL, f"internal error: {type(e).__name__}: {e}"), name)
        finally:
            writer.close()

    async def _relay(
        self, client: h11.Connection, writer: asyncio.StreamWriter, request: h11.Request,
        body: bytes, upstream: Upstream, id_text: str | None,
    ) -> None:
        timeout = self._timeout()
        up_reader, up_writer = await _connect(upstream, timeout)
        try:
            server = h11.Connection(h11.CLIENT, max_incomplete_event_size=1 << 20)
            # The client's query string (an API key, say) goes on too.
            target = upstream.target.encode("ascii")
            query = request.target.partition(b"?")[2]
            if query:
                target += (b"&" if b"?" in target else b"?") + query
            headers = [(n, v) for n, v in request.headers
                       if n.decode("latin-1") not in _NOT_FORWARDED and n != RELAY_HEADER.encode()]
            headers.insert(0, (b"host", upstream.authority.encode("idna")))
            headers.append((b"content-length", str(len(body)).encode()))
            # The relay reads buffered answers to check them: no compression.
            headers.append((b"accept-encoding", b"identity"))
            data = server.send(h11.Request(method=request.method, target=target,
                                           headers=headers))
            data += server.send(h11.Data(data=body)) if body else b""
            data += server.send(h11.EndOfMessage())
            up_writer.write(data)
            await _bounded(up_writer.drain(), timeout, upstream, "to take the request")

            response: h11.Response | None = None
            while response is None:
                event = await _next_event(server, up_reader, timeout, upstream, "to answer")
                if isinstance(event, h11.Response):
                    response = event
                elif not isinstance(event, h11.InformationalResponse):
                    raise GatewayFailure(UPSTREAM_INVALID,
                                         f"{upstream.url} closed the connection without answering")
            # One request per relay connection: mitmproxy must not reuse it.
            kept = [(n, v) for n, v in response.headers
                    if n.decode("latin-1") not in ("connection", "keep-alive",
                                                   "transfer-encoding", "content-length")]
            kept.append((b"connection", b"close"))
            content_type = _header(response.headers, "content-type")
            if content_type.lower().startswith("text/event-stream") and response.status_code < 400:
                # Passed on as it comes; a stream may stay quiet for long (the
                # client is answering an elicitation, say): no timeout here.
                writer.write(client.send(h11.Response(status_code=response.status_code,
                                                      headers=kept, reason=response.reason)))
                while True:
                    event = await _next_event(server, up_reader, None, upstream, "")
                    if isinstance(event, h11.Data):
                        writer.write(client.send(h11.Data(data=bytes(event.data))))
                        await writer.drain()
                    elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                        break
                writer.write(client.send(h11.EndOfMessage()))
                await writer.drain()
                return
            pieces: list[bytes] = []
            size = 0
            while True:
                event = await _next_event(server, up_reader, timeout, upstream,
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
            if request.method == b"POST":
                problem = answer_problem(response.status_code, content_type, answer)
                if problem is not None:
                    raise GatewayFailure(UPSTREAM_INVALID, f"{upstream.url} answered {problem}")
            kept.append((b"content-length", str(len(answer)).encode()))
            writer.write(client.send(h11.Response(status_code=response.status_code,
                                                  headers=kept, reason=response.reason)))
            writer.write(client.send(h11.Data(data=answer)) if answer else b"")
            writer.write(client.send(h11.EndOfMessage()))
            await writer.drain()
        finally:
            up_writer.close()


def _header(headers: list[tuple[bytes, bytes]], name: str) -> str:
    wanted = name.encode()
    for key, value in headers:
        if key.lower() == wanted:
            return value.decode("latin-1")
    return ""


async def _bounded(step: Awaitable[None], timeout: float, upstream: Upstream,
                   waited: str) -> None:
    try:
        await asyncio.wait_for(step, timeout)
    except TimeoutError:
        raise GatewayFailure(UPSTREAM_TIMEOUT,
                             f"{upstream.url} took more than {timeout:g} s {waited}") from None
    except OSError as e:
        raise GatewayFailure(UPSTREAM_UNREACHABLE,
                             f"the connection to {upstream.url} broke: {e.strerror or e}") from None


async def _next_event(connection: h11.Connection, reader: asyncio.StreamReader,
                      timeout: float | None, upstream: Upstream, waited: str) -> object:
    """The next h11 event of an upstream answer, reading as needed."""
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError as e:
            raise GatewayFailure(UPSTREAM_INVALID,
                                 f"{upstream.url} did not answer with valid HTTP ({e})") from None
        if event is not h11.NEED_DATA:
            return event
        read = reader.read(_READ_SIZE)
        try:
            received = await (asyncio.wait_for(read, timeout) if timeout is not None else read)
        except TimeoutError:
            raise GatewayFailure(UPSTREAM_TIMEOUT,
                                 f"{upstream.url} took more than {timeout:g} s {waited}") from None
        except OSError as e:
            raise GatewayFailure(UPSTREAM_UNREACHABLE,
                                 f"the connection to {upstream.url} broke: "
                                 f"{e.strerror or e}") from None
        connection.receive_data(received)


async def _read_request(connection: h11.Connection, reader: asyncio.StreamReader,
                        timeout: float) -> tuple[h11.Request, bytes]:
    """The request mitmproxy forwards (on 127.0.0.1: it comes at once)."""
    request: h11.Request | None = None
    pieces: list[bytes] = []
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await asyncio.wait_for(reader.read(_READ_SIZE), timeout))
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            pieces.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage) and request is not None:
            return request, b"".join(pieces)
        else:
            raise ValueError(f"unexpected request event {event!r}")


async def _send_error(connection: h11.Connection, writer: asyncio.StreamWriter,
                      id_text: str | None, failure: GatewayFailure, name: str) -> None:
    if connection.our_state is not h11.SEND_RESPONSE:
        return  # the answer has begun: all that is left is to end the stream
    body = error_body(id_text, failure.code, f"obsmask gateway: {failure.message}",
                      {"server": name})
    status = 200 if id_text is not None else ERROR_HTTP_STATUS[failure.code]
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode()),
               (b"connection", b"close"),
               (ERROR_HEADER.encode(), str(failure.code).encode())]
    try:
        writer.write(connection.send(h11.Response(status_code=status, headers=headers)))
        writer.write(connection.send(h11.Data(data=body)))
        writer.write(connection.send(h11.EndOfMessage()))
        await writer.drain()
    except (OSError, h11.LocalProtocolError):
        pass  # mitmproxy went away: nobody to tell
