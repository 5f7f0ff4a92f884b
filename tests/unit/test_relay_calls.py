"""The gateway addon's door to the relay (``GatewayRelay.call``): a POST is
answered with the server's answer, checked as the relay checks what it
passes on, over the relay's pooled connections; an event stream is parked
with the relay and passed on by it when mitmproxy comes for it; a call
cancelled (its client left) or a stream nobody came for closes the
server's connection. Everything on 127.0.0.1, each server stopped by its
test."""

from __future__ import annotations

import asyncio
import json

import pytest

from obsmask_core.gateway import relay as relay_module
from obsmask_core.gateway.errors import (
    GATEWAY_INTERNAL,
    UPSTREAM_INVALID,
    UPSTREAM_TIMEOUT,
    UPSTREAM_UNREACHABLE,
    GatewayFailure,
)
from obsmask_core.gateway.headers import KEEP_ALIVE_HEADER, PARKED_HEADER, RELAY_HEADER
from obsmask_core.gateway.relay import GatewayRelay
from obsmask_core.gateway.upstream_answers import Answer
from support.http_servers import (
    STREAM_HEAD,
    answers_json,
    elicits_then_answers,
    read_head,
    waits_for_its_end,
)
from support.relay_harness import REQUEST, free_port, relay_to, with_server

ANSWER = b'{"jsonrpc": "2.0", "id": "r-1", "result": {"content": []}}'
CLIENT_HEADERS = [(b"Host", b"127.0.0.1:8080"), (b"Content-Type", b"application/json"),
                  (b"Accept", b"application/json, text/event-stream"),
                  (b"Mcp-Session-Id", b"s-1"), (b"Connection", b"keep-alive"),
                  (RELAY_HEADER.encode(), b"other"), (KEEP_ALIVE_HEADER.encode(), b"1"),
                  (PARKED_HEADER.encode(), b"forged"), (b"Accept-Encoding", b"gzip")]


def upstream_of(relay: GatewayRelay) -> relay_module.Upstream:
    return relay._servers()["up"]


async def call(relay: GatewayRelay, body: bytes = REQUEST,
               query: bytes = b"key=k1") -> Answer | str:
    return await relay.call(upstream_of(relay), b"POST", query, CLIENT_HEADERS, body)


def test_a_call_gets_the_servers_answer_and_keeps_its_connection():
    """The server sees the client's request (its query string too) without
    the hop-by-hop headers and the gateway's own, asked for no compression;
    the answer comes back as the server sent it, without its framing
    headers, and the connection waits in the pool for the next call."""
    seen: list[tuple[bytes, bytes]] = []

    async def check(port: int) -> None:
        relay = relay_to(port)
        answer = await call(relay)
        idle = relay.pool.idle(upstream_of(relay))
        relay.close()
        assert isinstance(answer, Answer)
        assert (answer.status, answer.reason, answer.body) == (200, b"OK", ANSWER)
        assert answer.headers == [(b"content-type", b"application/json"),
                                  (b"mcp-session-id", b"s-1")]
        assert idle == 1

    asyncio.run(with_server(answers_json(ANSWER, seen), check))
    [(head, body)] = seen
    head = head.lower()
    assert head.startswith(b"post /mcp?key=k1 http/1.1\r\n")
    assert b"host: 127.0.0.1:" in head and b"127.0.0.1:8080" not in head
    assert b"mcp-session-id: s-1" in head and b"accept-encoding: identity" in head
    for ours in (RELAY_HEADER, KEEP_ALIVE_HEADER, PARKED_HEADER, "connection", "gzip"):
        assert ours.encode() not in head
    assert body == REQUEST


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_head(reader)
    await reader.read()
    writer.close()


async def html_page(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_head(reader)
    page = b"<html>Bad Gateway</html>"
    writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\n"
                 b"content-length: %d\r\n\r\n%s" % (len(page), page))
    await writer.drain()
    writer.close()


async def not_found(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_head(reader)
    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
    await writer.drain()
    writer.close()


@pytest.mark.parametrize(("server", "code", "said"), [
    (silent, UPSTREAM_TIMEOUT, "took more than"),
    (html_page, UPSTREAM_INVALID, "not JSON-RPC"),
    (not_found, UPSTREAM_INVALID, "/mcp"),
], ids=["silent", "html", "404"])
def test_a_call_fails_with_the_code_the_relay_answers_with(server, code, said):
    """The same failures as through the relay's server, with the same codes
    and words: the addon answers the client with them."""
    async def check(port: int) -> None:
        relay = relay_to(port, timeout=0.5)
        with pytest.raises(GatewayFailure) as failure:
            await call(relay)
        relay.close()
        assert failure.value.code == code and said in failure.value.message

    asyncio.run(with_server(server, check))


def test_a_call_to_a_server_that_refuses_fails_as_unreachable():
    async def main() -> None:
        relay = relay_to(free_port())
        with pytest.raises(GatewayFailure) as failure:
            await call(relay)
        relay.close()
        assert failure.value.code == UPSTREAM_UNREACHABLE

    asyncio.run(main())


def test_a_cancelled_call_closes_the_server_connection_at_once():
    """A client that leaves while its server works: the call is cancelled and
    the server sees its connection end, long before any timeout."""
    asked, closed = asyncio.Event(), asyncio.Event()

    async def check(port: int) -> None:
        relay = relay_to(port, timeout=30)
        task = asyncio.ensure_future(call(relay))
        await asyncio.wait_for(asked.wait(), 5)
        task.cancel()
        await asyncio.wait({task})
        await asyncio.wait_for(closed.wait(), 2)
        assert relay.pool.idle(upstream_of(relay)) == 0
        relay.close()

    asyncio.run(with_server(waits_for_its_end(asked, closed), check))


async def fetch_parked(relay: GatewayRelay, token: str, first: bytes,
                       first_seen: asyncio.Event) -> bytes:
    """What mitmproxy gets from the relay for the parked ``token``: it sets
    ``first_seen`` once ``first`` has come."""
    port = await relay.ensure_started()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /api/mcp-gateway/up/rpc HTTP/1.1\r\nhost: x\r\n"
                 + RELAY_HEADER.encode() + b": up\r\n" + PARKED_HEADER.encode() + b": "
                 + token.encode() + b"\r\ncontent-length: " + str(len(REQUEST)).encode()
                 + b"\r\n\r\n" + REQUEST)
    await writer.drain()
    seen = b""
    while first not in seen:
        seen += await asyncio.wait_for(reader.read(4096), 10)
    first_seen.set()
    seen += await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return seen


def test_an_event_stream_is_parked_and_passed_on_by_the_relay_event_by_event():
    """A server's request in the middle of a tool call (elicitation) must
    reach the client before the call ends: the call leaves the stream with
    the relay, which passes it on as it comes when mitmproxy asks for it,
    without asking the server a second time."""
    first_seen = asyncio.Event()
    requests: list[tuple[bytes, bytes]] = []

    async def check(port: int) -> None:
        relay = relay_to(port)
        token = await call(relay)
        assert isinstance(token, str) and relay.parked() == 1
        seen = await fetch_parked(relay, token, b"elicitation/create", first_seen)
        assert relay.parked() == 0
        relay.close()
        assert b"text/event-stream" in seen and b'"result"' in seen

    asyncio.run(with_server(elicits_then_answers(first_seen, requests), check))
    assert len(requests) == 1


def test_a_parked_stream_nobody_comes_for_is_closed(monkeypatch):
    """The client left between the call and mitmproxy's forwarding: the
    stream's server connection is closed after its time."""
    monkeypatch.setattr(relay_module, "PARK_SECONDS", 0.2)
    closed = asyncio.Event()

    async def check(port: int) -> None:
        relay = relay_to(port, timeout=30)
        assert isinstance(await call(relay), str)
        await asyncio.wait_for(closed.wait(), 5)
        assert relay.parked() == 0
        relay.close()

    asyncio.run(with_server(waits_for_its_end(asyncio.Event(), closed, STREAM_HEAD), check))


def test_a_token_the_relay_does_not_hold_gets_the_gateways_error():
    async def main() -> None:
        relay = relay_to(1)
        port = await relay.ensure_started()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /api/mcp-gateway/up/rpc HTTP/1.1\r\nhost: x\r\n"
                     + RELAY_HEADER.encode() + b": up\r\n" + PARKED_HEADER.encode()
                     + b": forged\r\ncontent-length: " + str(len(REQUEST)).encode()
                     + b"\r\n\r\n" + REQUEST)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        relay.close()
        answer = json.loads(raw.partition(b"\r\n\r\n")[2])
        assert answer["id"] == "r-1" and answer["error"]["code"] == GATEWAY_INTERNAL

    asyncio.run(main())
