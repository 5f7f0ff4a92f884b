"""End to end: MCP truncation touches MCP traffic only. A JSON-RPC API that
is not MCP (an Ethereum-style node answering ``eth_getCode`` with 20,002
characters, as JSON, as an SSE answer to a POST and on a GET event stream)
passes byte for byte through a real mitmdump, in reverse mode and in the
regular proxy mode (absolute-form requests to the proxy port); the same stub
answering MCP methods (``tools/call``, a batch mixing both, a legacy
``GET /sse`` stream that opens with its ``endpoint`` event) has its MCP
answers cut, in the same runs. The real MCP SDK's runs are in
``test_e2e_mcp.py``."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest

from obsmask_core.shared.truncation import TRUNCATION_MARK
from support.processes import MitmdumpProcess, running_mitmdump
from support.recording_server import Answer, Recorded, RecordingServer, recording_server

pytestmark = pytest.mark.e2e

ETH_CODE = "0x" + "6080604052" * 2_000  # 20,002 characters
MCP_TEXT = "HEAD" + "y" * 20_000 + "TAIL"
MARK = TRUNCATION_MARK.encode()
MODES = ("reverse", "regular")
EVENT_STREAM = {"content-type": "text/event-stream", "cache-control": "no-cache"}


def result_of(message: dict[str, object]) -> object:
    if message.get("method") == "tools/call":
        return {"content": [{"type": "text", "text": MCP_TEXT}], "isError": False}
    return ETH_CODE


def answer_to(message: dict[str, object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": message["id"], "result": result_of(message)}


def event(message: object, name: str | None = None) -> bytes:
    head = f"event: {name}\r\n" if name else ""
    return f"{head}data: {json.dumps(message)}\r\n\r\n".encode()


def in_pieces(data: bytes, size: int = 4096) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)]


# GET streams: another API's subscription stream, and the legacy MCP transport.
ETH_STREAM = (b": subscribed\r\n\r\n"
              + event({"jsonrpc": "2.0", "method": "eth_subscription",
                       "params": {"subscription": "0x1", "result": ETH_CODE}})
              + event({"jsonrpc": "2.0", "id": 7, "result": ETH_CODE}))
LEGACY_STREAM = (b"event: endpoint\r\ndata: /messages/?session_id=e2e\r\n\r\n"
                 + event(answer_to({"id": 3, "method": "tools/call"}), "message"))


def stub(request: Recorded) -> Answer:
    """``/rpc`` answers JSON, ``/rpc-sse`` an event stream; GET ``/stream``
    is the other API's subscription stream, GET ``/sse`` the legacy MCP one."""
    if request.method == "GET":
        stream = ETH_STREAM if request.path == "/stream" else LEGACY_STREAM
        return Answer(headers=EVENT_STREAM, body=in_pieces(stream))
    sent = json.loads(request.body)
    answered = [answer_to(m) for m in sent] if isinstance(sent, list) else answer_to(sent)
    if request.path == "/rpc-sse":
        return Answer(headers=EVENT_STREAM, body=in_pieces(event(answered)))
    return Answer(body=json.dumps(answered).encode())


def eth_call(message_id: int) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": message_id, "method": "eth_getCode",
            "params": ["0xdAC17F958D2ee523a2206206994597C13D831ec7", "latest"]}


TOOLS_CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
              "params": {"name": "read", "arguments": {}}}


@pytest.fixture(scope="module")
def server() -> Iterator[RecordingServer]:
    with recording_server(stub) as running:
        yield running


@pytest.fixture(scope="module", params=MODES)
def proxy(request, server, tmp_path_factory) -> Iterator[tuple[str, MitmdumpProcess]]:
    mode = request.param
    work = tmp_path_factory.mktemp(f"scope-{mode}")
    arguments = ["--mode", f"reverse:{server.url}"] if mode == "reverse" else []
    # cwd: a folder without mitm.toml, so the built-in defaults apply (the
    # wrapper names an empty settings file).
    with running_mitmdump(arguments, work, work / "confdir") as running:
        yield mode, running


def fetch(port: int, target: str, method: str, path: str, payload: object = None,
          ) -> tuple[int, str, bytes]:
    """One request; ``target`` is the path as sent: origin-form to a server
    or a reverse proxy, absolute-form to a regular proxy."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        data = None if payload is None else json.dumps(payload).encode()
        headers = {"content-type": "application/json"} if data else {}
        connection.request(method, target + path, body=data, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.getheader("content-type", ""), answer.read()
    finally:
        connection.close()


def both(server: RecordingServer, proxy: tuple[str, MitmdumpProcess], method: str,
         path: str, payload: object = None) -> tuple[bytes, bytes]:
    """The body the server sends directly, and the one through the proxy."""
    mode, running = proxy
    direct = fetch(server.port, "", method, path, payload)
    target = "" if mode == "reverse" else server.url
    through = fetch(running.port, target, method, path, payload)
    assert (through[0], through[1]) == (direct[0], direct[1])
    return direct[2], through[2]


@pytest.mark.parametrize("path", ["/rpc", "/rpc-sse"])
def test_an_eth_get_code_answer_passes_byte_for_byte(server, proxy, path):
    direct, through = both(server, proxy, "POST", path, eth_call(1))
    assert ETH_CODE.encode() in direct and len(direct) > 20_000
    assert through == direct


@pytest.mark.parametrize("path", ["/rpc", "/rpc-sse"])
def test_a_batch_of_eth_calls_passes_byte_for_byte(server, proxy, path):
    direct, through = both(server, proxy, "POST", path, [eth_call(1), eth_call(2)])
    assert through == direct and direct.count(ETH_CODE.encode()) == 2


def test_another_apis_get_event_stream_passes_byte_for_byte(server, proxy):
    direct, through = both(server, proxy, "GET", "/stream")
    assert direct == ETH_STREAM and through == direct


@pytest.mark.parametrize("path", ["/rpc", "/rpc-sse"])
def test_an_mcp_tool_call_is_still_cut(server, proxy, path):
    direct, through = both(server, proxy, "POST", path, TOOLS_CALL)
    assert MARK not in direct and MARK in through and len(through) < 5000


@pytest.mark.parametrize("path", ["/rpc", "/rpc-sse"])
def test_a_batch_mixing_eth_and_mcp_has_only_its_mcp_answer_cut(server, proxy, path):
    direct, through = both(server, proxy, "POST", path, [eth_call(1), TOOLS_CALL])
    assert through.count(MARK) == 1 and ETH_CODE.encode() in through
    assert MCP_TEXT.encode() in direct and MCP_TEXT.encode() not in through


def test_the_legacy_mcp_get_stream_is_still_cut(server, proxy):
    direct, through = both(server, proxy, "GET", "/sse")
    assert direct == LEGACY_STREAM
    assert through.startswith(b"event: endpoint\r\ndata: /messages/?session_id=e2e\r\n\r\n")
    assert MARK in through and len(through) < 5000
