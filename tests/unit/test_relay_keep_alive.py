"""The gateway relay's kept connections (``gateway/relay.py``,
``gateway/pool.py``): mitmproxy's connection to the relay serves one request
after another when the gateway addon asks for it, the relay's connections to
a server wait in a pool for the next request, and whatever a server does
with an idle connection (closes it, speaks on it, lets it sit), every
request gets its answer, sent once. Everything on 127.0.0.1, each server
stopped by its test."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest

from obsmask_core.gateway import pool
from obsmask_core.gateway.headers import KEEP_ALIVE_HEADER, RELAY_HEADER
from obsmask_core.gateway.relay import GatewayRelay
from obsmask_core.gateway.upstreams import parse_upstream

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def request_bytes(n: int, keep: bool = True, extra: bytes = b"") -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call"}).encode()
    return (b"POST /api/mcp-gateway/up/rpc HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            + RELAY_HEADER.encode() + b": up\r\n"
            + (KEEP_ALIVE_HEADER.encode() + b": 1\r\n" if keep else b"") + extra
            + b"content-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


def answer_bytes(n: int, close: bool = False) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": n, "result": {"n": n}}).encode()
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + (b"connection: close\r\n" if close else b"")
            + b"content-length: %d\r\n\r\n%s" % (len(body), body))


async def read_request(reader: asyncio.StreamReader) -> int | None:
    """The id of the next request on a server's connection; None at its end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    return int(json.loads(await reader.readexactly(length))["id"])


async def read_answer(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, object]]:
    """The head and the JSON body of the next answer on mitmproxy's side."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    return head.lower(), json.loads(await asyncio.wait_for(reader.readexactly(length), 10))


class Server:
    """A server that counts its connections and the requests it read."""

    def __init__(self, handler: Callable[[Server, asyncio.StreamReader, asyncio.StreamWriter],
                                         Awaitable[None]]) -> None:
        self.handler = handler
        self.connections = 0
        self.open = 0
        self.requests: list[int] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        try:
            await self.handler(self, reader, writer)
        finally:
            self.open -= 1
            writer.close()


async def keeps_answering(server: Server, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
    while (n := await read_request(reader)) is not None:
        server.requests.append(n)
        writer.write(answer_bytes(n))
        await writer.drain()


def run(handler: Callable[[Server, asyncio.StreamReader, asyncio.StreamWriter],
                          Awaitable[None]],
        test: Callable[[GatewayRelay, Server], Awaitable[None]]) -> Server:
    server = Server(handler)

    async def main() -> None:
        listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
        upstream = parse_upstream("up", f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
                                  "/mcp")
        relay = GatewayRelay(lambda: {"up": upstream}, lambda: 5.0)
        try:
            await test(relay, server)
        finally:
            relay.close()
            listening.close()
            await asyncio.sleep(0.05)

    asyncio.run(main())
    return server


async def connect(relay: GatewayRelay) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", await relay.ensure_started())


def test_a_kept_connection_serves_request_after_request_over_one_server_connection():
    async def test(relay: GatewayRelay, server: Server) -> None:
        reader, writer = await connect(relay)
        for n in range(5):
            writer.write(request_bytes(n))
            head, answer = await read_answer(reader)
            assert answer["id"] == n and b"connection: close" not in head
        writer.close()

    server = run(keeps_answering, test)
    assert server.requests == [0, 1, 2, 3, 4] and server.connections == 1


def test_without_the_header_the_relay_answers_once_and_closes():
    async def test(relay: GatewayRelay, server: Server) -> None:
        for n in range(2):
            reader, writer = await connect(relay)
            writer.write(request_bytes(n, keep=False))
            head, answer = await read_answer(reader)
            assert answer["id"] == n and b"connection: close" in head
            assert await asyncio.wait_for(reader.read(), 5) == b""
            writer.close()
        # The server's side still waits in the pool.
        assert server.connections == 1

    run(keeps_answering, test)


def test_a_client_that_says_close_gets_its_connection_closed():
    async def test(relay: GatewayRelay, server: Server) -> None:
        reader, writer = await connect(relay)
        writer.write(request_bytes(1, extra=b"connection: close\r\n"))
        head, _ = await read_answer(reader)
        assert b"connection: close" in head
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()

    run(keeps_answering, test)


def test_a_server_that_closes_after_answering_gets_a_new_connection_each_time():
    async def answers_once(server: Server, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
        n = await read_request(reader)
        assert n is not None
        server.requests.append(n)
        writer.write(answer_bytes(n))
        await writer.drain()

    async def test(relay: GatewayRelay, server: Server) -> None:
        reader, writer = await connect(relay)
        for n in range(3):
            writer.write(request_bytes(n))
            _, answer = await read_answer(reader)
            assert answer["id"] == n
            await asyncio.sleep(0.05)  # the close reaches the relay
        writer.close()

    server = run(answers_once, test)
    assert server.requests == [0, 1, 2] and server.connections == 3


def test_a_server_that_says_close_is_not_kept():
    async def says_close(server: Server, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        n = await read_request(reader)
        assert n is not None
        server.requests.append(n)
        writer.write(answer_bytes(n, close=True))
        await writer.drain()
        await reader.read()  # the relay closes its side

    async def test(relay: GatewayRelay, server: Server) -> None:
        reader, writer = await connect(relay)
        for n in range(2):
            writer.write(request_bytes(n))
            _, answer = await read_answer(reader)
            assert answer["id"] == n
        writer.close()
        await asyncio.sleep(0.05)
        assert server.open == 0

    server = run(says_close, test)
    assert server.connections == 2


def second_request_fails(fail: Callable[[asyncio.StreamWriter], Awaitable[None]]) -> None:
    """A server that answers the first request of a kept connection and,
    reading the second, does ``fail`` instead of answering: the relay never
    sends the second again (the server may have run it), and the client
    gets the gateway's error for it."""
    async def fails_the_second(server: Server, reader: asyncio.StreamReader,
                               writer: asyncio.StreamWriter) -> None:
        while (n := await read_request(reader)) is not None:
            server.requests.append(n)
            if len(server.requests) == 2:
                await fail(writer)
                return
            writer.write(answer_bytes(n))
            await writer.drain()

    async def test(relay: GatewayRelay, server: Server) -> None:
        reader, writer = await connect(relay)
        writer.write(request_bytes(0))
        _, answer = await read_answer(reader)
        assert answer["id"] == 0
        writer.write(request_bytes(1))
        _, answer = await read_answer(reader)
        assert isinstance(answer["error"], dict) and answer["id"] == 1
        writer.close()

    server = run(fails_the_second, test)
    assert server.requests == [0, 1]


def test_a_request_on_a_kept_connection_that_breaks_is_never_sent_again():
    """The server reads the second request on the kept connection and closes
    it without a byte of answer. It may have run it (a tools/call that
    crashed its worker looks the same as an idle timeout): the relay does
    not send it again, and the client gets the gateway's error."""
    async def closes(writer: asyncio.StreamWriter) -> None:
        pass  # the handler returns: closed, nothing answered

    second_request_fails(closes)


def test_a_request_whose_server_ran_it_and_then_died_is_not_run_twice():
    async def runs_then_dies(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.3)  # it runs the call...
        writer.transport.abort()  # ...and its worker dies (a reset)

    second_request_fails(runs_then_dies)


def test_bytes_past_an_answer_never_become_the_next_requests_answer():
    """A server that sends one answer more than asked for (in the same
    write): the connection is not kept, and the next request gets its own
    answer on a new connection."""
    async def answers_twice(server: Server, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
        while (n := await read_request(reader)) is not None:
            server.requests.append(n)
            writer.write(answer_bytes(n) + (answer_bytes(999) if n == 0 else b""))
            await writer.drain()

    async def test(relay: GatewayRelay, server: Server) -> None:
        reader, writer = await connect(relay)
        for n in range(2):
            writer.write(request_bytes(n))
            _, answer = await read_answer(reader)
            assert answer["id"] == n
        writer.close()

    server = run(answers_twice, test)
    assert server.requests == [0, 1] and server.connections == 2


def test_a_kept_connection_that_half_answered_is_never_sent_again():
    """Some bytes of an answer came: the server read the request, which
    must not run twice. The client gets the gateway's error instead."""
    async def half_answers(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-le")
        await writer.drain()

    second_request_fails(half_answers)


def test_an_idle_server_connection_is_closed_after_its_time(monkeypatch):
    monkeypatch.setattr(pool, "IDLE_SECONDS", 0.1)

    async def test(relay: GatewayRelay, server: Server) -> None:
        reader, writer = await connect(relay)
        writer.write(request_bytes(1))
        await read_answer(reader)
        upstream = relay._servers()["up"]
        assert relay.pool.idle(upstream) == 1
        await asyncio.sleep(0.4)
        assert relay.pool.idle(upstream) == 0 and server.open == 0
        writer.write(request_bytes(2))  # a new connection, as if never kept
        _, answer = await read_answer(reader)
        assert answer["id"] == 2
        writer.close()

    server = run(keeps_answering, test)
    assert server.connections == 2


@pytest.mark.parametrize("speaks", [False, True], ids=["closes", "speaks"])
def test_a_server_that_closes_or_speaks_on_an_idle_connection_loses_it_at_once(speaks):
    async def then_idles(server: Server, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        n = await read_request(reader)
        assert n is not None
        server.requests.append(n)
        writer.write(answer_bytes(n))
        await writer.drain()
        await asyncio.sleep(0.1)
        if not speaks:
            return  # closed: its own idle timeout
        # An answer to nothing (some servers send a 408 before they close).
        writer.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        while (n := await read_request(reader)) is not None:
            server.requests.append(n)

    async def test(relay: GatewayRelay, server: Server) -> None:
        reader, writer = await connect(relay)
        writer.write(request_bytes(1))
        await read_answer(reader)
        await asyncio.sleep(0.3 if speaks else 0.2)
        assert relay.pool.idle(relay._servers()["up"]) == 0
        writer.close()

    server = run(then_idles, test)
    assert server.requests == [1]


def test_closing_the_relay_closes_its_idle_server_connections():
    async def test(relay: GatewayRelay, server: Server) -> None:
        reader, writer = await connect(relay)
        writer.write(request_bytes(1))
        await read_answer(reader)
        writer.close()
        assert server.open == 1
        relay.close()
        await asyncio.sleep(0.1)
        assert server.open == 0

    run(keeps_answering, test)


def test_an_event_stream_keeps_both_connections():
    async def streams(server: Server, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        while (n := await read_request(reader)) is not None:
            server.requests.append(n)
            event = b'data: {"jsonrpc": "2.0", "id": %d, "result": {}}\n\n' % n
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n"
                         + b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event))
            await writer.drain()

    async def test(relay: GatewayRelay, server: Server) -> None:
        reader, writer = await connect(relay)
        for n in range(3):
            writer.write(request_bytes(n))
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert b"transfer-encoding: chunked" in head.lower()
            body = await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 10)
            assert b'"id": %d' % n in body
        writer.close()

    server = run(streams, test)
    assert server.requests == [0, 1, 2] and server.connections == 1
