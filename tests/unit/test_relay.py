"""The gateway's relay (``gateway/relay.py``), in-process: an MCP server that
is unreachable, silent or answers with something other than JSON-RPC becomes
a JSON-RPC error with the request's id and a code of its own and a clear
message, and event streams pass as they come. Everything on 127.0.0.1, each
server stopped by its test."""

from __future__ import annotations

import asyncio
import json

import pytest

from obsmask_core.gateway.errors import (
    CLIENT_NOT_ALLOWED,
    UPSTREAM_INVALID,
    UPSTREAM_TIMEOUT,
    UPSTREAM_UNREACHABLE,
)
from obsmask_core.gateway.headers import ERROR_HEADER, REFUSED_HEADER, RELAY_HEADER
from obsmask_core.gateway.relay import GatewayRelay
from obsmask_core.gateway.upstreams import parse_upstream
from support.http_servers import elicits_then_answers, read_head
from support.relay_harness import REQUEST, free_port, relay_to, with_server

NOTIFICATION = b'{"jsonrpc": "2.0", "method": "notifications/initialized"}'


async def ask(relay: GatewayRelay, body: bytes, server: str = "up",
              target: bytes = b"/api/mcp-gateway/up/rpc",
              extra: bytes = b"") -> tuple[int, dict[bytes, bytes], bytes]:
    """One request to the relay, as mitmproxy sends it; status, headers, body."""
    port = await relay.ensure_started()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST " + target + b" HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        + RELAY_HEADER.encode() + b": " + server.encode() + b"\r\n" + extra
        + b"content-type: application/json\r\ncontent-length: "
        + str(len(body)).encode() + b"\r\n\r\n" + body)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 20)
    writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    headers = dict(line.lower().split(b": ", 1) for line in lines[1:])
    if headers.get(b"transfer-encoding") == b"chunked":
        rest = dechunk(rest)
    return int(lines[0].split()[1]), headers, rest


def dechunk(data: bytes) -> bytes:
    out = b""
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return out
        out, data = out + data[:size], data[size + 2:]


def test_refused_connection_answers_the_request_id_with_status_200():
    async def main() -> None:
        relay = relay_to(free_port())
        status, headers, body = await ask(relay, REQUEST)
        relay.close()
        answer = json.loads(body)
        assert status == 200 and headers[b"content-type"] == b"application/json"
        assert answer["id"] == "r-1" and answer["error"]["code"] == UPSTREAM_UNREACHABLE
        assert answer["error"]["message"].startswith("obsmask gateway: cannot connect to")
        assert answer["error"]["data"] == {"server": "up"}
        assert headers[ERROR_HEADER.encode()] == str(UPSTREAM_UNREACHABLE).encode()

    asyncio.run(main())


def test_a_notification_gets_an_http_error_and_a_null_id():
    async def main() -> None:
        relay = relay_to(free_port())
        status, _, body = await ask(relay, NOTIFICATION)
        relay.close()
        assert status == 502 and json.loads(body)["id"] is None

    asyncio.run(main())


def test_a_silent_server_times_out():
    async def silent(reader: asyncio.StreamReader, _writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers

    async def check(port: int) -> None:
        relay = relay_to(port, timeout=1)
        status, _, body = await ask(relay, REQUEST)
        relay.close()
        error = json.loads(body)["error"]
        assert status == 200 and error["code"] == UPSTREAM_TIMEOUT
        assert "took more than 1 s to answer" in error["message"]

    asyncio.run(with_server(silent, check))


@pytest.mark.parametrize("status", [200, 502])
def test_an_html_answer_is_not_jsonrpc(status):
    async def html(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        page = b"<html><body>Bad Gateway</body></html>"
        writer.write(b"HTTP/1.1 %d X\r\ncontent-type: text/html\r\ncontent-length: %d\r\n\r\n%s"
                     % (status, len(page), page))
        await writer.drain()
        writer.close()

    async def check(port: int) -> None:
        relay = relay_to(port)
        answered, _, body = await ask(relay, REQUEST)
        relay.close()
        error = json.loads(body)["error"]
        assert answered == 200 and error["code"] == UPSTREAM_INVALID
        assert f"answered HTTP {status} with text/html, not JSON-RPC" in error["message"]

    asyncio.run(with_server(html, check))


def test_a_jsonrpc_error_with_an_error_status_passes_unchanged():
    """The client needs the server's 404 to see that its session ended."""
    gone = b'{"jsonrpc": "2.0", "id": "r-1", "error": {"code": -32001, "message": "gone"}}'

    async def expired(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(gone), gone))
        await writer.drain()
        writer.close()

    async def check(port: int) -> None:
        relay = relay_to(port)
        status, headers, body = await ask(relay, REQUEST)
        relay.close()
        assert (status, body) == (404, gone) and ERROR_HEADER.encode() not in headers

    asyncio.run(with_server(expired, check))


def test_an_event_stream_passes_event_by_event():
    """A server's request in the middle of a tool call (elicitation, sampling)
    must reach the client before the call ends: the client's answer is what
    the server waits for. Here the server sends its second event only once
    the first one has come out of the relay."""
    first_seen = asyncio.Event()
    requests: list[tuple[bytes, bytes]] = []

    async def check(port: int) -> None:
        relay = relay_to(port)
        relay_port = await relay.ensure_started()
        reader, writer = await asyncio.open_connection("127.0.0.1", relay_port)
        writer.write(b"POST /api/mcp-gateway/up/rpc?key=k1 HTTP/1.1\r\nhost: x\r\n"
                     + RELAY_HEADER.encode() + b": up\r\ncontent-encoding: gzip\r\n"
                     b"content-length: 4\r\n\r\nGZIP")
        await writer.drain()
        seen = b""
        while b"elicitation/create" not in seen:
            seen += await asyncio.wait_for(reader.read(4096), 10)
        first_seen.set()
        seen += await asyncio.wait_for(reader.read(), 10)
        writer.close()
        relay.close()
        assert b"text/event-stream" in seen and b'"result"' in seen
        [(head, body)] = requests
        head = head.lower()
        assert head.startswith(b"post /mcp?key=k1 http/1.1")  # the query goes on
        assert RELAY_HEADER.encode() not in head
        # The body goes as the client sent it, with its own encoding.
        assert b"content-encoding: gzip" in head and body == b"GZIP"

    asyncio.run(with_server(elicits_then_answers(first_seen, requests), check))


async def hang_up_after(relay: GatewayRelay, seen: bytes, asked: asyncio.Event) -> None:
    """Send REQUEST to the relay, wait for the server to have it (``asked``)
    and read until ``seen`` has come (nothing if empty), then close the
    connection, as a client that gives up makes mitmproxy do."""
    port = await relay.ensure_started()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /api/mcp-gateway/up/rpc HTTP/1.1\r\nhost: x\r\n"
                 + RELAY_HEADER.encode() + b": up\r\ncontent-length: "
                 + str(len(REQUEST)).encode() + b"\r\n\r\n" + REQUEST)
    await writer.drain()
    await asyncio.wait_for(asked.wait(), 10)
    got = b""
    while seen not in got:
        got += await asyncio.wait_for(reader.read(4096), 10)
    writer.close()
    await writer.wait_closed()


@pytest.mark.parametrize("streaming", [False, True], ids=["silent", "long-stream"])
def test_a_client_that_leaves_closes_the_upstream_connection_at_once(streaming, caplog):
    """A client that gives up on a silent server (or leaves a long event
    stream) closes mitmproxy's side of the relay connection: the relay must
    notice at once, close its upstream connection (the server sees its end
    long before the 30 s timeout) and its own socket, and log no error."""
    caplog.set_level("DEBUG", logger="obsmask_core")
    upstream_closed, asked = asyncio.Event(), asyncio.Event()

    async def server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        asked.set()
        if streaming:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            event = b'data: {"jsonrpc": "2.0", "method": "notifications/progress"}\n\n'
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
        try:
            await reader.read()  # the relay's end, or a reset
        except OSError:
            pass
        upstream_closed.set()
        writer.close()

    async def check(port: int) -> None:
        relay = relay_to(port, timeout=30)
        await hang_up_after(relay, b"progress" if streaming else b"", asked)
        await asyncio.wait_for(upstream_closed.wait(), 5)
        await asyncio.sleep(0.2)
        relay.close()

    asyncio.run(with_server(server, check))
    errors = [r for r in caplog.records if r.levelname in ("WARNING", "ERROR", "CRITICAL")]
    assert errors == [] and not any(r.exc_info for r in caplog.records)
    assert any("went away" in r.getMessage() for r in caplog.records)


def test_a_client_that_leaves_before_its_request_ends_is_no_error(caplog):
    async def main() -> None:
        relay = relay_to(free_port())
        port = await relay.ensure_started()
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /api/mcp-gateway/up/rpc HTTP/1.1\r\nhost: x\r\n"
                     b"content-length: 100\r\n\r\n{\"jsonrpc\": ")
        await writer.drain()
        writer.close()
        await asyncio.sleep(0.3)
        relay.close()

    asyncio.run(main())
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]


def test_an_answer_that_is_not_http_is_not_quoted():
    """h11's message quotes the bytes it could not read: they may be secret."""
    async def junk(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.write(b"SECRET-7f3a9c not http at all\r\n\r\n")
        await writer.drain()
        writer.close()

    async def check(port: int) -> None:
        relay = relay_to(port)
        _, _, body = await ask(relay, REQUEST)
        relay.close()
        error = json.loads(body)["error"]
        assert error["code"] == UPSTREAM_INVALID and "SECRET" not in body.decode()

    asyncio.run(with_server(junk, check))


def test_a_404_names_the_path_the_mcp_sdks_serve():
    """A server of a bare base URL answers the gateway's POST to / with a
    404 page: the error says where the MCP SDKs serve (mitm.toml once
    shipped such URLs)."""
    async def not_found(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\n"
                     b"content-length: 9\r\n\r\nNot Found")
        await writer.drain()
        writer.close()

    async def check(port: int) -> None:
        upstream = parse_upstream("up", f"http://127.0.0.1:{port}")
        relay = GatewayRelay(lambda: {"up": upstream}, lambda: 5.0)
        _, _, body = await ask(relay, REQUEST)
        relay.close()
        error = json.loads(body)["error"]
        assert error["code"] == UPSTREAM_INVALID
        assert "answered HTTP 404 with text/plain, not JSON-RPC; the MCP SDKs serve /mcp: " \
               "is the URL in [mcp_gateway.servers] missing its path?" in error["message"]

    asyncio.run(with_server(not_found, check))


def test_the_shipped_gateway_examples_point_at_the_sdk_path():
    """The shipped settings declare no gateway server; the examples their
    comment gives to copy post to the path the MCP SDKs' servers answer on."""
    import tomllib

    from obsmask_core.shared.config_file import load_config
    from support.processes import REPO

    assert not load_config(str(REPO / "mitm.toml")).table(("mcp_gateway", "servers"))
    text = (REPO / "mitm.toml").read_text(encoding="utf-8")
    section = text.split("[mcp_gateway.servers]", 1)[1].split("\n[", 1)[0]
    examples = tomllib.loads("\n".join(line.removeprefix("# ") for line in section.splitlines()
                                       if line.startswith("# ") and '= "http' in line))
    assert examples and all(parse_upstream(name, str(url)).target == "/mcp"
                            for name, url in examples.items())


def test_a_request_the_gateway_refused_gets_its_error_and_never_reaches_the_server():
    """A client the gateway does not serve, whose body mitmproxy streamed to
    the relay: the relay reads it, answers the error with the request's id,
    and asks no server."""
    asked: list[bytes] = []

    async def server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked.append(await reader.read(100))
        writer.close()

    async def test(port: int) -> None:
        relay = relay_to(port)
        status, headers, body = await ask(relay, REQUEST,
                                          extra=REFUSED_HEADER.encode() + b": 1\r\n")
        relay.close()
        answer = json.loads(body)
        assert status == 200 and answer["id"] == "r-1"
        assert answer["error"]["code"] == CLIENT_NOT_ALLOWED
        assert headers[ERROR_HEADER.encode()] == str(CLIENT_NOT_ALLOWED).encode()

    asyncio.run(with_server(server, test))
    assert asked == []
