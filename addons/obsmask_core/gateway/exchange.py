"""The HTTP/1.1 side of the gateway's relay, with h11 over asyncio streams:
connecting to an MCP server, reading the request mitmproxy forwards (and
waiting for the next one), reading the next event of an answer within a
time limit, the bytes of an event, and giving up on a server as soon as
mitmproxy closes its side.

Every way an upstream fails (no connection, too slow, not HTTP, a broken
connection) comes out as a GatewayFailure with its JSON-RPC error code, for
the relay to answer with.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

import h11

from obsmask_core.gateway.errors import (
    UPSTREAM_INVALID,
    UPSTREAM_TIMEOUT,
    UPSTREAM_UNREACHABLE,
    GatewayFailure,
)
from obsmask_core.gateway.upstreams import Upstream

# The most bytes one read from a connection asks for.
READ_SIZE = 1 << 16

_T = TypeVar("_T")


class ClientGone(Exception):
    """mitmproxy's side of a relay connection closed (or broke, or never
    sent its request): nobody is left to answer, which is no error."""


class WatchedProtocol(asyncio.StreamReaderProtocol):
    """A StreamReaderProtocol that tells at once, with no task reading,
    when bytes come (``on_data``) or the other side closes or breaks the
    connection (``on_end``; ``ended`` says it happened), for as long as
    these are set."""

    def __init__(self, reader: asyncio.StreamReader,
                 connected: Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                     Awaitable[None]] | None = None) -> None:
        super().__init__(reader, connected)
        self.on_data: Callable[[], None] | None = None
        self.on_end: Callable[[], None] | None = None
        self.ended = False
        # Bytes the server sent so far: what was not read yet is still in
        # the reader's buffer (the pool never keeps such a connection).
        self.received = 0

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        super().data_received(data)
        if self.on_data is not None:
            self.on_data()

    def eof_received(self) -> bool:
        kept_open = bool(super().eof_received())
        self._end()
        return kept_open

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._end()

    def _end(self) -> None:
        self.ended = True
        if self.on_end is not None:
            self.on_end()


async def connect(upstream: Upstream, timeout: float, tls: ssl.SSLContext | None) -> tuple[
        asyncio.StreamReader, asyncio.StreamWriter, WatchedProtocol]:
    """A connection to ``upstream`` (TLS with ``tls`` for https), open within
    ``timeout`` s (asyncio.open_connection's, with a WatchedProtocol)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_SIZE)
    protocol = WatchedProtocol(reader)
    try:
        async with asyncio.timeout(timeout):
            transport, _ = await loop.create_connection(
                lambda: protocol, upstream.host, upstream.port, ssl=tls)
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
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop), protocol


def event_bytes(connection: h11.Connection, event: h11.Event) -> bytes:
    """The bytes of an event; only ConnectionClosed gives none, never sent here."""
    data = connection.send(event)
    assert data is not None
    return data


def header_value(headers: Iterable[tuple[bytes, bytes]], name: str) -> str:
    """The value of the first header called ``name`` (lower case), or ""."""
    wanted = name.encode()
    for key, value in headers:
        if key.lower() == wanted:
            return value.decode("latin-1")
    return ""


async def bounded(step: Awaitable[_T], timeout: float | None, upstream: Upstream,
                  waited: str) -> _T:
    """``step`` awaited for at most ``timeout`` s (None: no limit); running out
    of time, or the connection breaking, is a GatewayFailure that says what
    ``upstream`` took too long for (``waited``)."""
    try:
        # asyncio.timeout, not wait_for: no task of its own for each read.
        async with asyncio.timeout(timeout):
            return await step
    except TimeoutError:
        raise GatewayFailure(UPSTREAM_TIMEOUT,
                             f"{upstream.url} took more than {timeout:g} s {waited}") from None
    except OSError as e:
        raise GatewayFailure(UPSTREAM_UNREACHABLE,
                             f"the connection to {upstream.url} broke: {e.strerror or e}") from None


async def next_event(connection: h11.Connection, read: Callable[[], Awaitable[bytes]],
                     timeout: float | None, upstream: Upstream, waited: str,
                     before_waiting: Callable[[], Awaitable[None]] | None = None) -> object:
    """The next h11 event of an upstream answer, reading (``read``) as needed;
    ``before_waiting`` is awaited before each read (to send on what was held)."""
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError:
            # h11's message may quote the answer's bytes: never in a log.
            raise GatewayFailure(UPSTREAM_INVALID,
                                 f"{upstream.url} did not answer with valid HTTP") from None
        if event is not h11.NEED_DATA:
            return event
        if before_waiting is not None:
            await before_waiting()
        connection.receive_data(await bounded(read(), timeout, upstream, waited))


async def read_request(connection: h11.Connection, reader: asyncio.StreamReader,
                       timeout: float | None) -> tuple[h11.Request, bytes]:
    """The request mitmproxy forwards (on 127.0.0.1: it comes at once);
    ClientGone if the connection closes or stalls first (``timeout`` None:
    no limit, for a kept-alive connection, which mitmproxy closes itself)."""
    request: h11.Request | None = None
    pieces: list[bytes] = []
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError:  # cut short (its message may quote bytes)
            raise ClientGone("its request broke off or is not HTTP") from None
        if event is h11.NEED_DATA:
            try:
                async with asyncio.timeout(timeout):
                    data = await reader.read(READ_SIZE)
            except TimeoutError:
                raise ClientGone(f"no request within {timeout:g} s") from None
            except OSError as e:
                raise ClientGone(f"the connection broke ({type(e).__name__})") from None
            connection.receive_data(data)
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            pieces.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage) and request is not None:
            return request, b"".join(pieces)
        elif isinstance(event, h11.ConnectionClosed):
            raise ClientGone("closed before the end of its request")
        else:  # never quoted: an event may carry request bytes
            raise ValueError(f"unexpected request event {type(event).__name__}")


async def closed_before_next_request(connection: h11.Connection,
                                     reader: asyncio.StreamReader) -> bool:
    """Wait for the next request of a kept-alive connection: whether
    mitmproxy closes the connection (or breaks it) before sending any of it."""
    if connection.trailing_data[0]:
        return False
    try:
        data = await reader.read(READ_SIZE)
    except OSError:
        return True
    if not data:
        return True
    connection.receive_data(data)
    return False


async def unless_closed(side: WatchedProtocol, relay: Callable[[], Awaitable[None]]) -> None:
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
