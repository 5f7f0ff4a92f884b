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
gateway route took far longer than a direct one (docs/benchmarks.md).

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
from collections.abc import Callable, Mapping

import h11

from obsmask_core.gateway.errors import (
    CLIENT_NOT_ALLOWED,
    GATEWAY_INTERNAL,
    UNKNOWN_SERVER,
    GatewayFailure,
    error_response,
    request_id_text,
)
from obsmask_core.gateway.exchange import (
    READ_SIZE,
    ClientGone,
    WatchedProtocol,
    closed_before_next_request,
    event_bytes,
    header_value,
    read_request,
    unless_closed,
)
from obsmask_core.gateway.headers import (
    ERROR_HEADER,
    KEEP_ALIVE_HEADER,
    PARKED_HEADER,
    REFUSED_HEADER,
    RELAY_HEADER,
)
from obsmask_core.gateway.pool import UpstreamConnection, UpstreamPool
from obsmask_core.gateway.relay_answers import Parked, pass_parked, relay_answer
from obsmask_core.gateway.upstream_answers import (
    Answer,
    answer_headers,
    buffered_answer,
    is_event_stream,
    outgoing,
    send,
)
from obsmask_core.gateway.upstreams import Upstream

logger = logging.getLogger(__name__)

# How long a parked event stream waits for mitmproxy to come for it: it is
# forwarded at once, unless its client left in between.
PARK_SECONDS = 10.0


class GatewayRelay:
    """A local HTTP/1.1 server that mitmproxy forwards the gateway's flows
    to (the module says why), on 127.0.0.1: each kind of failure of a
    server becomes a JSON-RPC error with a code of its own (see
    ``obsmask_core.gateway.errors``), and an event stream is passed on as it
    arrives (a server's elicitation or sampling request in the middle of a
    tool call must reach the client before the call ends)."""

    def __init__(self, servers: Callable[[], Mapping[str, Upstream]],
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
        self._parked: dict[str, Parked] = {}

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
        sent = outgoing(method, query, headers, body, upstream)
        server = await self.pool.connection(upstream, timeout)
        done = False
        try:
            # Never sent again, even on a kept connection that broke: the
            # server may have run it (gateway/pool.py says why).
            response = await send(server, sent, body, upstream, timeout)
            if is_event_stream(response):
                done = True
                return self._park(server, response, upstream)
            answer = await buffered_answer(server, method, response, upstream, timeout)
            done = True
            self.pool.give_back(upstream, server)
            return Answer(response.status_code, bytes(response.reason),
                          answer_headers(response), answer)
        finally:
            if not done:
                server.close()  # cut short: the server sees its end at once

    def _park(self, server: UpstreamConnection, response: h11.Response,
              upstream: Upstream) -> str:
        token = secrets.token_hex(16)
        expiry = asyncio.get_running_loop().call_later(PARK_SECONDS, self._expire, token)
        self._parked[token] = Parked(server, response, upstream, expiry)
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
            if not first and await closed_before_next_request(client, reader):
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
                    await unless_closed(side, lambda: pass_parked(self.pool, client, writer,
                                                                  parked, keep))
                except ClientGone:
                    parked.server.close()
                    raise
                return keep and client.our_state is h11.DONE
            upstream = self._servers().get(name)
            if upstream is None:
                raise GatewayFailure(UNKNOWN_SERVER, f"no MCP server named {name!r}")
            await unless_closed(side, lambda: relay_answer(
                self.pool, client, writer, request, body, upstream, keep, self._timeout()))
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
