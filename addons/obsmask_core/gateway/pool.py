"""The gateway's connections to its MCP servers, kept open between exchanges.

A new connection per tool call costs the server a TCP (and TLS) handshake
and the proxy its share of both, on the one event loop every flow shares;
under load that was most of what made the gateway slower than a direct
route. So a connection whose exchange ended cleanly (HTTP/1.1, both sides
done, no ``Connection: close``) waits here for the next request to the same
server, at most ``IDLE_SECONDS`` and at most ``MAX_IDLE_PER_SERVER`` of
them per server.

While it waits, a server that closes it (its own idle timeout) or sends
anything on it (a ``408``, garbage) ends its stay at once: its protocol
tells (``WatchedProtocol``), with no task reading. A connection with a
byte of the server's not yet read (one more answer than asked for) is never
kept: that byte would be taken for the next request's answer.

A server may still close a connection just as a request goes out on it.
The relay never sends the request again: a ``tools/call`` is not
idempotent, and no sign tells a connection closed before the server read
the request from one whose server ran it and then died. The client gets
the gateway's error and decides; the idle time, under the usual servers'
keep-alive, keeps that rare.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl

import h11

from obsmask_core.gateway.exchange import READ_SIZE, WatchedProtocol, connect
from obsmask_core.gateway.upstreams import Upstream

# Below the keep-alive timeouts of the usual servers (uvicorn and Node.js
# 5 s, gunicorn 2 s): a server rarely closes a connection the relay is
# about to use.
IDLE_SECONDS = 1.5
MAX_IDLE_PER_SERVER = 32

_Key = tuple[str, str, int]


def _key(upstream: Upstream) -> _Key:
    return upstream.scheme, upstream.host, upstream.port


class UpstreamConnection:
    """One HTTP/1.1 connection to a server, with its h11 state; ``reused``
    when it served an exchange before."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 protocol: WatchedProtocol, http: h11.Connection | None = None) -> None:
        self.reader = reader
        self.writer = writer
        self.protocol = protocol
        self.http = http or h11.Connection(h11.CLIENT, max_incomplete_event_size=1 << 20)
        self.reused = http is not None
        self.read_bytes = protocol.received if http is not None else 0

    async def read(self) -> bytes:
        """The next bytes from the server (b"" once it has closed)."""
        data = await self.reader.read(READ_SIZE)
        self.read_bytes += len(data)
        return data

    @property
    def open(self) -> bool:
        """Neither side has closed it."""
        return not self.writer.is_closing() and not self.reader.at_eof()

    @property
    def reusable(self) -> bool:
        """The exchange ended cleanly, the server keeps the connection, and
        it sent nothing past its answer (neither in h11's buffer nor unread)."""
        return (self.http.our_state is h11.DONE and self.http.their_state is h11.DONE
                and self.open and not self.http.trailing_data[0]
                and self.protocol.received == self.read_bytes)

    def close(self) -> None:
        self.writer.close()


class _Idle:
    """A connection waiting in the pool, and the timer that ends its wait."""

    __slots__ = ("connection", "timer")

    def __init__(self, connection: UpstreamConnection) -> None:
        self.connection = connection
        self.timer: asyncio.TimerHandle | None = None

    def stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


class UpstreamPool:
    """Idle connections per server (scheme, host and port)."""

    def __init__(self) -> None:
        self._idle: dict[_Key, list[_Idle]] = {}
        # One TLS context for every https server, made at the first: making
        # one reads the system's certificates again, on the event loop.
        self._tls: ssl.SSLContext | None = None

    def idle(self, upstream: Upstream) -> int:
        """How many connections to ``upstream``'s server wait now."""
        return len(self._idle.get(_key(upstream), []))

    async def connection(self, upstream: Upstream, timeout: float) -> UpstreamConnection:
        """A connection to ``upstream``: the one that waited least, if one is
        left; else a new one (GatewayFailure if it cannot be made within
        ``timeout`` s)."""
        waiting = self._idle.get(_key(upstream), [])
        while waiting:
            idle = waiting.pop()
            idle.stop_timer()
            connection = idle.connection
            connection.protocol.on_data = connection.protocol.on_end = None
            if connection.open:
                return UpstreamConnection(connection.reader, connection.writer,
                                          connection.protocol, connection.http)
            connection.close()
        return UpstreamConnection(*await connect(upstream, timeout, self._tls_for(upstream)))

    def _tls_for(self, upstream: Upstream) -> ssl.SSLContext | None:
        if upstream.scheme != "https":
            return None
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def give_back(self, upstream: Upstream, connection: UpstreamConnection) -> None:
        """Keep ``connection`` for the next exchange if it may serve one;
        else close it."""
        if not connection.reusable:
            connection.close()
            return
        connection.http.start_next_cycle()
        key = _key(upstream)
        waiting = self._idle.setdefault(key, [])
        if len(waiting) >= MAX_IDLE_PER_SERVER:
            self._drop(key, waiting[0])
            waiting = self._idle.setdefault(key, [])
        idle = _Idle(connection)
        drop = functools.partial(self._drop, key, idle)
        idle.timer = asyncio.get_running_loop().call_later(IDLE_SECONDS, drop)
        # Whatever the server does with an idle connection (closes it, sends
        # a 408 or garbage) ends its wait at once: its next answer would not
        # be the answer to the next request.
        connection.protocol.on_data = connection.protocol.on_end = drop
        waiting.append(idle)

    def close(self) -> None:
        """Close every waiting connection (the proxy stops)."""
        for key, waiting in list(self._idle.items()):
            for idle in list(waiting):
                self._drop(key, idle)
        self._idle.clear()

    def _drop(self, key: _Key, idle: _Idle) -> None:
        waiting = self._idle.get(key, [])
        with contextlib.suppress(ValueError):
            waiting.remove(idle)
        if not waiting:
            self._idle.pop(key, None)
        idle.stop_timer()
        connection = idle.connection
        connection.protocol.on_data = connection.protocol.on_end = None
        connection.close()
