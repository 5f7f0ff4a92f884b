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
from support.processes import running_mitmdump

pytestmark = pytest.mark.e2e


def call_with_argument_of(chars: int, n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                       "params": {"name": "write", "arguments": {"text": "x" * chars}}}).encode()


@pytest.mark.parametrize("chars", [100, 20_000])
def test_a_post_whose_body_mitmproxy_streams_reaches_the_server_whole(chars, tmp_path: Path):
    with load_stub() as stub:
        empty = tmp_path / "empty.toml"
        empty.write_text("")
        servers = [arg for name, path in GATEWAY_SERVERS.items()
                   for arg in ("--set", f"mcpmask_gateway_servers={name}={stub.url}{path}")]
        arguments = ["--mode", f"reverse:{stub.url}", "--set", f"obsmask_config={empty}",
                     "--set", "stream_large_bodies=1k", *servers]
        body = call_with_argument_of(chars, 7)
        with running_mitmdump(arguments, tmp_path, tmp_path / "confdir") as proxy:
            connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
            try:
                connection.request("POST", "/api/mcp-gateway/stub/rpc?id=7&tag=call", body,
                                   {"content-type": "application/json"})
                response = connection.getresponse()
                answer = response.read()
            finally:
                connection.close()
            output = proxy.output()
        assert stub.received.get("call") == len(body), output
        assert (response.status, answer) == (200, mcp_answer(7)), output
        assert "Traceback" not in output and "internal error" not in output, output
