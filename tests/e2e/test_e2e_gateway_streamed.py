"""A gateway request whose body mitmproxy streams (``stream_large_bodies``),
through a real mitmdump with obsmask: mitmproxy sends such a body on as it
comes, before the ``request`` hook, so the gateway must send it to its
relay from the headers on; the server must get the whole body, and the
client the server's answer."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest

from benchlib.load.cases import GATEWAY_SERVERS
from benchlib.load.stub import load_stub, mcp_answer
from obsmask_core.gateway.errors import UNKNOWN_SERVER
from support.processes import running_mitmdump

pytestmark = pytest.mark.e2e


def call_with_argument_of(chars: int, n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                       "params": {"name": "write", "arguments": {"text": "x" * chars}}}).encode()


def chunks_of(body: bytes) -> list[bytes]:
    return [body[at:at + 4096] for at in range(0, len(body), 4096)]


@pytest.mark.parametrize("chars, chunked", [(100, False), (20_000, False), (20_000, True)])
def test_a_post_whose_body_mitmproxy_streams_reaches_the_server_whole(chars, chunked,
                                                                      tmp_path: Path):
    """Streamed from its headers (a content-length past the limit) or once
    buffered past it (a chunked body, with no hook then): the body goes to
    the MCP server, none of it to the proxy's reverse target."""
    with load_stub() as stub, load_stub() as reverse_target:
        empty = tmp_path / "empty.toml"
        empty.write_text("")
        servers = [arg for name, path in GATEWAY_SERVERS.items()
                   for arg in ("--set", f"mcpmask_gateway_servers={name}={stub.url}{path}")]
        arguments = ["--mode", f"reverse:{reverse_target.url}", "--set",
                     f"obsmask_config={empty}", "--set", "stream_large_bodies=1k", *servers]
        body = call_with_argument_of(chars, 7)
        with running_mitmdump(arguments, tmp_path, tmp_path / "confdir") as proxy:
            connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
            try:
                connection.request("POST", "/api/mcp-gateway/stub/rpc?id=7&tag=call",
                                   chunks_of(body) if chunked else body,
                                   {"content-type": "application/json"},
                                   encode_chunked=chunked)
                response = connection.getresponse()
                answer = response.read()
            finally:
                connection.close()
            output = proxy.output()
        assert reverse_target.requests == 0, output
        assert stub.received.get("call") == len(body), output
        assert (response.status, answer) == (200, mcp_answer(7)), output
        assert "Traceback" not in output and "internal error" not in output, output


def test_a_request_for_an_unknown_server_whose_body_mitmproxy_streams_gets_the_gateways_error(
        tmp_path: Path):
    """Refused, and streamed once buffered past the limit (chunked): the
    body goes to obsmask's relay, which answers the JSON-RPC error, and
    never to the proxy's reverse target."""
    with load_stub() as reverse_target:
        empty = tmp_path / "empty.toml"
        empty.write_text("")
        arguments = ["--mode", f"reverse:{reverse_target.url}", "--set",
                     f"obsmask_config={empty}", "--set", "stream_large_bodies=1k"]
        body = call_with_argument_of(20_000, 7)
        with running_mitmdump(arguments, tmp_path, tmp_path / "confdir") as proxy:
            connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
            try:
                connection.request("POST", "/api/mcp-gateway/nowhere/rpc", chunks_of(body),
                                   {"content-type": "application/json"}, encode_chunked=True)
                response = connection.getresponse()
                answer = json.loads(response.read())
            finally:
                connection.close()
            output = proxy.output()
        assert reverse_target.requests == 0, output
        assert response.status == 200 and answer["id"] == 7, output
        assert answer["error"]["code"] == UNKNOWN_SERVER, output
        assert "Traceback" not in output and "internal error" not in output, output
