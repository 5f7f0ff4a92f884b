"""The gateway's relay: a local HTTP/1.1 server between mitmproxy and the
MCP servers behind ``/api/mcp-gateway/{server_name}/rpc``.

mitmproxy answers an unreachable upstream with an HTML 502 page and never
times out a silent one, and an addon cannot stream a body it makes itself.
So mitmproxy forwards a gateway flow to this relay on 127.0.0.1, which talks
to the real server (HTTP/1.1, with h11): a failure becomes a JSON-RPC error
with a code of its own, an event stream passes as it arrives, and mitmproxy
sees an ordinary answer that the MCP addon cuts as usual.

Both hops keep their connections, as a direct route does: mitmproxy's to
the relay serves the next request of the same client connection when the
gateway addon asks for it (``KEEP_ALIVE_HEADER``; without it, one exchange
per connection), and the relay's to a server wait in a pool for the next
request to that server (``obsmask_core.gateway.pool``). A connection per
request cost each request two connection set-ups, mitmproxy's hooks for
them and two more log lines, all on the one event loop: under load the
gateway route took five times as long as a direct one.

A POST (a tool call, most of the gateway's work) does not need the relay's
HTTP server at all: the gateway addon asks the relay for the answer itself
(``GatewayRelay.call``) and gives it to mitmproxy as the flow's answer, one
hop as on a direct route. Only an answer that is an event stream must come
through the relay's server, to be passed on as it arrives: the call then
leaves it with the relay (``park``), and the addon forwards the flow to the
relay with its token (``PARKED_HEADER``), which the relay answers with that
stream instead of asking the server again.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import h11

from obsmask_core.gateway.errors import (
    CLIENT_NOT_ALLOWED,
    GATEWAY_INTERNAL,
    UNKNOWN_SERVER,
    UPSTREAM_INVALID,
    GatewayFailure,
    error_response,
    request_id_text,
)
from obsmask_core.gateway.exchange import (
    READ_SIZE,
    ClientGone,
    WatchedProtocol,
    bounded,
    event_bytes,
    header_value,
    next_event,
    read_request,
)
from obsmask_core.gateway.pool import UpstreamConnection, UpstreamPool
from obsmask_core.gateway.upstreams import Upstream
from obsmask_core.mcp.jsonrpc_check import reads_as_jsonrpc

logger = logging.getLogger(__name__)

# The most the gateway reads from one answer (it holds it to check it).
MAX_ANSWER_BYTES = 256 << 20
# Hop-by-hop headers (RFC 9110 7.6.1) and those the exchange sets itself.
_NOT_FORWARDED = frozenset({
    "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te",
    "trailer", "transfer-encoding", "upgrade", "host", "content-length",
    "accept-encoding",
})

RELAY_HEADER = "x-obsmask-gateway-server"  # request: which server (mitmproxy -> relay)
# request: mitmproxy may send its next request on the same connection
KEEP_ALIVE_HEADER = "x-obsmask-gateway-keep-alive"
ERROR_HEADER = "x-obsmask-gateway-error"  # answer: the code of a failure (relay -> addon)
# request: answer with the event stream parked under this token (addon -> relay)
PARKED_HEADER = "x-obsmask-gateway-parked"
# request: the gateway does not serve this client; answer its error, after
# reading the body mitmproxy streamed here (addon -> relay)
REFUSED_HEADER = "x-obsmask-gateway-refused"
_OURS = frozenset({RELAY_HEADER.encode(), KEEP_ALIVE_HEADER.encode(), PARKED_HEADER.encode(),
                   REFUSED_HEADER.encode()})
# How long a parked event stream waits for mitmproxy to come for it: it is
# forwarded at once, unless its client left in between.
PARK_SECONDS = 10.0
# Where the MCP SDKs' Streamable HTTP servers answer, named when a server says 404.
SDK_PATH = "/mcp"


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


def _is_event_stream(response: h11.Response) -> bool:
    return (header_value(response.headers, "content-type").lower().startswith("text/event-stream")
            and response.status_code < 400)


def _outgoing(method: bytes, query: bytes, headers: list[tuple[bytes, bytes]], body: bytes,
              upstream: Upstream) -> h11.Request:
    """The request to ``upstream``: the client's method, query string (an
    API key, say) and headers but the hop-by-hop ones and ours."""
    target = upstream.target.encode("ascii")
    if query:
        target += (b"&" if b"?" in target else b"?") + query
    sent = [(n, v) for n, v in headers
            if n.decode("latin-1").lower() not in _NOT_FORWARDED and n.lower() not in _OURS]
    sent.insert(0, (b"host", upstream.authority.encode("idna")))
    sent.append((b"content-length", str(len(body)).encode()))
    # The gateway reads buffered answers to check them: no compression.
    sent.append((b"accept-encoding", b"identity"))
    return h11.Request(method=method, target=target, headers=sent)


def _answer_headers(response: h11.Response) -> list[tuple[bytes, bytes]]:
    """The server's headers but those of its connection and framing."""
    return [(n, v) for n, v in response.headers
            if n.decode("latin-1") not in ("connection", "keep-alive", "transfer-encoding",
                                           "content-length")]


async def _buffered_answer(server: UpstreamConnection, method: bytes, response: h11.Response,
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


@dataclass(frozen=True)
class Answer:
    """A buffered answer of a server, for the gateway addon to give the client."""

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes


@dataclass(frozen=True)
class _Parked:
    """An event stream whose head was read, waiting for mitmproxy."""

    server: UpstreamConnection
    response: h11.Response
    upstream: Upstream
    expiry: asyncio.TimerHandle


class GatewayRelay:
    """A local HTTP/1.1 server that mitmproxy forwards the gateway's flows to.

    mitmproxy answers an unreachable upstream with an HTML 502 page and waits
    for a silent one for ever, and an addon cannot stream a body it makes
    itself. So the relay, on 127.0.0.1, talks to the real server: a failure
    becomes a JSON-RPC error with a code of its own for each kind of failure
    (see ``obsmask_core.gateway.errors``), an event stream is
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
        self.pool = UpstreamPool()
        self.port = 0
        # mitmproxy's connections to the relay, closed with it: kept ones
        # would wait for a next request for as long as the loop runs.
        self._clients: set[asyncio.StreamWriter] = set()
        self._parked: dict[str, _Parked] = {}

    async def ensure_started(self) -> int:
        async with self._starting:
            if self._server is None:
                self._server = await asyncio.get_running_loop().create_server(
                    self._client_side, "127.0.0.1", 0)
                self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._clients):
            writer.close()
        for token in list(self._parked):
            self._expire(token)
        self.pool.close()

    async def call(self, upstream: Upstream, method: bytes, query: bytes,
                   headers: list[tuple[bytes, bytes]], body: bytes) -> Answer | str:
        """Ask ``upstream`` for the answer to one request, for the gateway
        addon: the answer, read and checked as the relay checks the answers
        it passes on; or, for an event stream, the token under which the
        relay now holds it (``PARKED_HEADER``). GatewayFailure when the
        server gives no answer; cancelled, it closes the connection, and the
        server sees its client leave."""
        timeout = self._timeout()
        outgoing = _outgoing(method, query, headers, body, upstream)
        server = await self.pool.connection(upstream, timeout)
        done = False
        try:
            # Never sent again, even on a kept connection that broke: the
            # server may have run it (gateway/pool.py says why).
            response = await _send(server, outgoing, body, upstream, timeout)
            if _is_event_stream(response):
                done = True
                return self._park(server, response, upstream)
            answer = await _buffered_answer(server, method, response, upstream, timeout)
            done = True
            self.pool.give_back(upstream, server)
            return Answer(response.status_code, bytes(response.reason),
                          _answer_headers(response), answer)
        finally:
            if not done:
                server.close()  # cut short: the server sees its end at once

    def _park(self, server: UpstreamConnection, response: h11.Response,
              upstream: Upstream) -> str:
        token = secrets.token_hex(16)
        expiry = asyncio.get_running_loop().call_later(PARK_SECONDS, self._expire, token)
        self._parked[token] = _Parked(server, response, upstream, expiry)
        return token

    def _expire(self, token: str) -> None:
        """A parked stream nobody came for (its client left): closed."""
        parked = self._parked.pop(token, None)
        if parked is not None:
            parked.expiry.cancel()
            parked.server.close()

    def parked(self) -> int:
        """How many event streams wait for mitmproxy now."""
        return len(self._parked)

    def _client_side(self) -> WatchedProtocol:
        """The protocol of a connection from mitmproxy: it tells at once when
        mitmproxy closes it (its client gave up on a silent server or a long
        stream), with no task watching."""
        side = WatchedProtocol(asyncio.StreamReader(limit=READ_SIZE),
                               lambda reader, writer: self._serve(side, reader, writer))
        return side

    async def _serve(self, side: WatchedProtocol, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        client = h11.Connection(h11.SERVER)
        self._clients.add(writer)
        try:
            first = True
            while await self._exchange(side, client, reader, writer, first):
                client.start_next_cycle()
                first = False
        except asyncio.CancelledError:
            # The loop is stopping with the connection open. Ended quietly:
            # Python 3.11's start_server logs a cancelled handler as an error.
            pass
        finally:
            self._clients.discard(writer)
            writer.close()

    async def _exchange(self, side: WatchedProtocol, client: h11.Connection,
                        reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        first: bool) -> bool:
        """Read one request of the connection and answer it; whether the
        connection then serves another (mitmproxy asked for that, and
        everything went well)."""
        request: h11.Request | None = None
        body = b""
        name = ""
        try:
            if not first and await _closed_before_next_request(client, reader):
                return False  # mitmproxy closed an idle connection: its client left
            # A first request comes at once; the next ones when mitmproxy's
            # client sends them.
            request, body = await read_request(client, reader,
                                               self._timeout() if first else None)
            name = header_value(request.headers, RELAY_HEADER)
            keep = (header_value(request.headers, KEEP_ALIVE_HEADER) == "1"
                    and client.their_state is h11.DONE)
            if header_value(request.headers, REFUSED_HEADER):
                raise GatewayFailure(CLIENT_NOT_ALLOWED, "the gateway does not serve this "
                                     "client (mcpmask_gateway_allow_clients)")
            token = header_value(request.headers, PARKED_HEADER)
            if token:
                parked = self._parked.pop(token, None)
                if parked is None:
                    raise GatewayFailure(GATEWAY_INTERNAL, "the answer of the server was "
                                         "not kept for this request")
                parked.expiry.cancel()
                try:
                    await _unless_closed(side, lambda: self._pass_parked(client, writer, parked,
                                                                         keep))
                except ClientGone:
                    parked.server.close()
                    raise
                return keep and client.our_state is h11.DONE
            upstream = self._servers().get(name)
            if upstream is None:
                raise GatewayFailure(UNKNOWN_SERVER, f"no MCP server named {name!r}")
            await _unless_closed(side, lambda: self._relay(client, writer, request, body,
                                                           upstream, keep))
            return keep and client.our_state is h11.DONE
        except GatewayFailure as failure:
            await _send_error(client, writer, _id_of(request, body), failure, name)
        except (ClientGone, ConnectionError) as e:
            # mitmproxy's side closed: its client gave up (or a write to it
            # failed, which only a closed connection does). No error.
            logger.debug("obsmask: gateway relay: the client of %r went away (%s)",
                         name, e if isinstance(e, ClientGone) else type(e).__name__)
        except Exception as e:  # the client gets an answer whatever happens
            logger.exception("obsmask: gateway relay: internal error")
            if client.our_state is h11.SEND_RESPONSE:
                # The type only: an exception's message may quote request bytes.
                await _send_error(client, writer, _id_of(request, body), GatewayFailure(
                    GATEWAY_INTERNAL, f"internal error: {type(e).__name__}"), name)
        return False

    async def _relay(
        self, client: h11.Connection, writer: asyncio.StreamWriter, request: h11.Request,
        body: bytes, upstream: Upstream, keep: bool = False,
    ) -> None:
        timeout = self._timeout()
        outgoing = _outgoing(request.method, request.target.partition(b"?")[2],
                             list(request.headers), body, upstream)
        server = await self.pool.connection(upstream, timeout)
        done = False
        try:
            # Never sent again, even on a kept connection that broke: the
            # server may have run it (gateway/pool.py says why).
            response = await _send(server, outgoing, body, upstream, timeout)
            if _is_event_stream(response):
                def finished() -> None:
                    nonlocal done
                    done = True
                    self.pool.give_back(upstream, server)

                await self._stream(client, writer, server, response, upstream, keep, finished)
                return
            answer = await _buffered_answer(server, request.method, response, upstream, timeout)
            kept = _answer_headers(response)
            if not keep:  # one request per relay connection: mitmproxy must not reuse it
                kept.append((b"connection", b"close"))
            kept.append((b"content-length", str(len(answer)).encode()))
            # One write: each segment mitmproxy reads is an event that goes
            # through all its layers.
            writer.write(b"".join((
                event_bytes(client, h11.Response(status_code=response.status_code,
                                                 headers=kept, reason=response.reason)),
                event_bytes(client, h11.Data(data=answer)) if answer else b"",
                event_bytes(client, h11.EndOfMessage()))))
            # The server's side is done: its connection may serve the next
            # request while this answer still drains to mitmproxy.
            done = True
            self.pool.give_back(upstream, server)
            await writer.drain()
        finally:
            if not done:
                server.close()  # cut short: the server sees its end at once

    async def _pass_parked(self, client: h11.Connection, writer: asyncio.StreamWriter,
                           parked: _Parked, keep: bool) -> None:
        """Answer mitmproxy with the event stream the addon's call parked."""
        done = False

        def finished() -> None:
            nonlocal done
            done = True
            self.pool.give_back(parked.upstream, parked.server)

        try:
            await self._stream(client, writer, parked.server, parked.response,
                               parked.upstream, keep, finished)
        finally:
            if not done:
                parked.server.close()  # cut short: the server sees its end at once

    async def _stream(self, client: h11.Connection, writer: asyncio.StreamWriter,
                      server: UpstreamConnection, response: h11.Response, upstream: Upstream,
                      keep: bool, finished: Callable[[], None]) -> None:
        """Pass an event stream on as it comes; a stream may stay quiet for
        long (the client is answering an elicitation, say): no timeout here.
        What came in one read goes out in one write (each segment mitmproxy
        reads goes through all its layers), before the relay waits for more.
        ``finished`` is called once the server's side is done, before the
        end of the stream goes to mitmproxy."""
        kept = _answer_headers(response)
        if not keep:  # one request per relay connection: mitmproxy must not reuse it
            kept.append((b"connection", b"close"))
        held = [event_bytes(client, h11.Response(
            status_code=response.status_code, headers=kept, reason=response.reason))]

        async def send_held() -> None:
            if held:
                writer.write(b"".join(held))
                held.clear()
                await writer.drain()

        while True:
            event = await next_event(server.http, server.read, None, upstream, "", send_held)
            if isinstance(event, h11.Data):
                held.append(event_bytes(client, h11.Data(data=bytes(event.data))))
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                break
        finished()
        held.append(event_bytes(client, h11.EndOfMessage()))
        await send_held()


async def _send(server: UpstreamConnection, request: h11.Request, body: bytes,
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


async def _closed_before_next_request(client: h11.Connection,
                                      reader: asyncio.StreamReader) -> bool:
    """Wait for the next request of a kept-alive connection: whether
    mitmproxy closes the connection (or breaks it) before sending any of it."""
    if client.trailing_data[0]:
        return False
    try:
        data = await reader.read(READ_SIZE)
    except OSError:
        return True
    if not data:
        return True
    client.receive_data(data)
    return False


async def _unless_closed(side: WatchedProtocol, relay: Callable[[], Awaitable[None]]) -> None:
    """Run ``relay``, unless mitmproxy closes its side of the connection
    first (or has already): then ``relay`` is cancelled, which closes the
    upstream connection, and ClientGone is raised. mitmproxy sends nothing
    after its request until it has the answer, so any end of its side is
    the client leaving (what it would send stays in the reader, for the
    next request)."""
    if side.ended:
        raise ClientGone("closed before the server was asked")
    task = asyncio.current_task()
    assert task is not None
    gone = False

    def close() -> None:
        nonlocal gone
        gone = True
        task.cancel()

    side.on_end = close
    try:
        await relay()
    except asyncio.CancelledError:
        if not gone:
            raise  # the loop stops: not ours to handle
        task.uncancel()
        raise ClientGone("closed while the server had not finished answering") from None
    finally:
        side.on_end = None


def _id_of(request: h11.Request | None, body: bytes) -> str | None:
    """The id of the request to answer an error to (read only then)."""
    if request is None or request.method != b"POST":
        return None
    return request_id_text(body)


async def _send_error(connection: h11.Connection, writer: asyncio.StreamWriter,
                      id_text: str | None, failure: GatewayFailure, name: str) -> None:
    if connection.our_state is not h11.SEND_RESPONSE:
        return  # the answer has begun: all that is left is to end the stream
    answer = error_response(id_text, failure, name)
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(answer.body)).encode()),
               (b"connection", b"close"),
               (ERROR_HEADER.encode(), str(failure.code).encode())]
    try:
        writer.write(b"".join((
            event_bytes(connection, h11.Response(status_code=answer.status, headers=headers)),
            event_bytes(connection, h11.Data(data=answer.body)),
            event_bytes(connection, h11.EndOfMessage()))))
        await writer.drain()
    except (OSError, h11.LocalProtocolError):
        pass  # mitmproxy went away: nobody to tell
