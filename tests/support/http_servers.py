"""Small HTTP/1.1 servers for the gateway's tests, on asyncio streams: they
read one request (Content-Length bodies only) and answer as each test
needs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_head(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """The request head and its body."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


async def _end(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Wait for the other side to close or reset the connection, then close."""
    try:
        await reader.read()
    except OSError:
        pass
    writer.close()


def waits_for_its_end(asked: asyncio.Event, closed: asyncio.Event,
                      begins: bytes = b"") -> Handler:
    """A server that reads the request (then sets ``asked``), writes
    ``begins`` (the head of an answer it never ends, or nothing) and waits
    for the other side to close or reset the connection (then ``closed``)."""
    async def server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        asked.set()
        if begins:
            writer.write(begins)
            await writer.drain()
        await _end(reader, writer)
        closed.set()

    return server


STREAM_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
               b"transfer-encoding: chunked\r\n\r\n")


def _chunk(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def elicits_then_answers(first_seen: asyncio.Event,
                         requests: list[tuple[bytes, bytes]]) -> Handler:
    """A server whose tool call asks the client something (an elicitation
    request, in an event stream) and answers only once ``first_seen`` says
    the question came out the other side; it records each request (head,
    body) in ``requests`` and then waits for the connection's end."""
    async def server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(await read_head(reader))
        writer.write(STREAM_HEAD + _chunk(
            b'data: {"jsonrpc": "2.0", "id": 0, "method": "elicitation/create"}\n\n'))
        await writer.drain()
        await asyncio.wait_for(first_seen.wait(), 10)
        writer.write(_chunk(b'data: {"jsonrpc": "2.0", "id": "r-1", "result": {}}\n\n')
                     + b"0\r\n\r\n")
        await writer.drain()
        await _end(reader, writer)

    return server


def answers_json(answer: bytes, requests: list[tuple[bytes, bytes]],
                 session: bytes = b"s-1") -> Handler:
    """A server that answers ``answer`` as JSON (with an Mcp-Session-Id),
    records the request (head, body) in ``requests`` and keeps the
    connection until the other side ends it."""
    async def server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(await read_head(reader))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                     b"mcp-session-id: %s\r\ncontent-length: %d\r\n\r\n%s"
                     % (session, len(answer), answer))
        await writer.drain()
        await _end(reader, writer)

    return server
