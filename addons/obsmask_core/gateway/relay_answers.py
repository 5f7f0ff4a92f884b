"""The relay's answers to mitmproxy: a server's buffered answer in one
write, an event stream passed on as it comes, and the stream the gateway
addon's call parked. Each gives its server connection back to the pool
once the server's side is done, and closes it when cut short (the server
then sees its client leave at once)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import h11

from obsmask_core.gateway.exchange import event_bytes, next_event
from obsmask_core.gateway.pool import UpstreamConnection, UpstreamPool
from obsmask_core.gateway.upstream_answers import (
    answer_headers,
    buffered_answer,
    is_event_stream,
    outgoing,
    send,
)
from obsmask_core.gateway.upstreams import Upstream


@dataclass(frozen=True)
class Parked:
    """An event stream whose head was read, waiting for mitmproxy."""

    server: UpstreamConnection
    response: h11.Response
    upstream: Upstream
    expiry: asyncio.TimerHandle


def _head_headers(response: h11.Response, keep: bool) -> list[tuple[bytes, bytes]]:
    """The headers of the answer to mitmproxy: the server's but those of its
    connection and framing, and ``connection: close`` unless mitmproxy may
    send its next request on the connection (``keep``)."""
    kept = answer_headers(response)
    if not keep:  # one request per relay connection: mitmproxy must not reuse it
        kept.append((b"connection", b"close"))
    return kept


async def relay_answer(
    pool: UpstreamPool, client: h11.Connection, writer: asyncio.StreamWriter,
    request: h11.Request, body: bytes, upstream: Upstream, keep: bool, timeout: float,
) -> None:
    """Ask ``upstream`` for the answer to mitmproxy's request, and pass it on."""
    sent = outgoing(request.method, request.target.partition(b"?")[2], list(request.headers),
                    body, upstream)
    server = await pool.connection(upstream, timeout)
    done = False
    try:
        # Never sent again, even on a kept connection that broke: the
        # server may have run it (gateway/pool.py says why).
        response = await send(server, sent, body, upstream, timeout)
        if is_event_stream(response):
            def finished() -> None:
                nonlocal done
                done = True
                pool.give_back(upstream, server)

            await pass_stream(client, writer, server, response, upstream, keep, finished)
            return
        answer = await buffered_answer(server, request.method, response, upstream, timeout)
        kept = _head_headers(response, keep)
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
        pool.give_back(upstream, server)
        await writer.drain()
    finally:
        if not done:
            server.close()  # cut short: the server sees its end at once


async def pass_parked(pool: UpstreamPool, client: h11.Connection, writer: asyncio.StreamWriter,
                      parked: Parked, keep: bool) -> None:
    """Answer mitmproxy with the event stream the addon's call parked."""
    done = False

    def finished() -> None:
        nonlocal done
        done = True
        pool.give_back(parked.upstream, parked.server)

    try:
        await pass_stream(client, writer, parked.server, parked.response, parked.upstream, keep,
                          finished)
    finally:
        if not done:
            parked.server.close()  # cut short: the server sees its end at once


async def pass_stream(client: h11.Connection, writer: asyncio.StreamWriter,
                      server: UpstreamConnection, response: h11.Response, upstream: Upstream,
                      keep: bool, finished: Callable[[], None]) -> None:
    """Pass an event stream on as it comes; a stream may stay quiet for
    long (the client is answering an elicitation, say): no timeout here.
    What came in one read goes out in one write (each segment mitmproxy
    reads goes through all its layers), before the relay waits for more.
    ``finished`` is called once the server's side is done, before the
    end of the stream goes to mitmproxy."""
    held = [event_bytes(client, h11.Response(
        status_code=response.status_code, headers=_head_headers(response, keep),
        reason=response.reason))]

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
