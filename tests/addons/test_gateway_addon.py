"""The McpGateway addon inside mitmproxy's test context, beside the MCP
addon as obsmask.py runs them: an unknown server answered with a JSON-RPC
error; a POST answered by the addon with the server's answer (servers on
127.0.0.1, started by each test), or forwarded to the relay when the answer
is an event stream; other methods sent through the relay; a replayed flow
never sent again, and a relay failure recorded on the flow."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from mitmproxy import exceptions, http
from mitmproxy.addons.intercept import Intercept
from mitmproxy.addons.modifybody import ModifyBody
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.connection import ConnectionState
from mitmproxy.test import tflow, tutils

from obsmask_core.gateway.errors import CLIENT_NOT_ALLOWED, UNKNOWN_SERVER, UPSTREAM_UNREACHABLE
from obsmask_core.gateway.headers import KEEP_ALIVE_HEADER, PARKED_HEADER, REFUSED_HEADER
from obsmask_core.mitm.mcp_addon import METADATA_KEY
from obsmask_core.shared.networks import client_allowed
from obsmask_core.shared.truncation import TRUNCATION_MARK
from support.http_servers import STREAM_HEAD, answers_json, waits_for_its_end
from support.mcp_flows import mcp_flow, response_message, run_hooks


def test_unknown_server_gets_a_jsonrpc_error_with_the_request_id(context):
    """An unknown server name reaches the client as a JSON-RPC 2.0 error object
    with the request's id, a dedicated documented code and a message that
    says what happened."""
    addon, _ = context
    flow = tflow.tflow(req=tutils.treq(
        method=b"POST", path=b"/api/mcp-gateway/nowhere/rpc",
        content=b'{"jsonrpc": "2.0", "id": "req-9", "method": "initialize"}'))
    asyncio.run(addon.request(flow))
    assert isinstance(flow.response, http.Response)
    assert flow.response.status_code == 200
    assert flow.response.headers["content-type"] == "application/json"
    answer = json.loads(flow.response.content)
    assert answer["jsonrpc"] == "2.0" and answer["id"] == "req-9"
    assert answer["error"]["code"] == UNKNOWN_SERVER
    assert "'nowhere'" in answer["error"]["message"]


def test_a_get_stream_is_sent_through_the_relay(context):
    """mitmproxy forwards a gateway flow that is not a POST (a GET stream, a
    DELETE) to obsmask's relay on 127.0.0.1, which talks to the server
    (tests/unit/test_relay.py); a token a client sends cannot name another
    flow's parked answer."""
    addon, tctx = context
    tctx.configure(addon.mcp, mcpmask_gateway_servers=["fs=http://127.0.0.1:8004/mcp"])
    flow = tflow.tflow(req=tutils.treq(method=b"GET", path=b"/api/mcp-gateway/fs/rpc",
                                       content=b""))
    flow.request.headers[PARKED_HEADER] = "guessed"

    async def route() -> None:
        await addon.request(flow)
        addon.relay.close()

    asyncio.run(route())
    assert flow.response is None
    assert (flow.request.host, flow.request.port) == ("127.0.0.1", addon.relay.port)
    assert flow.request.headers["x-obsmask-gateway-server"] == "fs"
    assert PARKED_HEADER not in flow.request.headers
    # mitmproxy may send the client's next request on the same connection.
    assert flow.request.headers[KEEP_ALIVE_HEADER] == "1"
    assert flow.metadata[METADATA_KEY]["gateway_upstream"] == "http://127.0.0.1:8004/mcp"


TOOLS_LIST = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'


def post_to(tctx, addon, port: int) -> http.HTTPFlow:
    tctx.configure(addon.mcp, mcpmask_gateway_servers=[f"fs=http://127.0.0.1:{port}/mcp"])
    return tflow.tflow(req=tutils.treq(method=b"POST", path=b"/api/mcp-gateway/fs/rpc?k=1",
                                       content=TOOLS_LIST))


async def serving(handler, test) -> None:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        await test(server.sockets[0].getsockname()[1])
    finally:
        server.close()


def test_a_post_is_answered_by_the_addon_with_the_servers_answer(context):
    """A tool call takes one hop, as on a direct route: the addon asks the
    server itself and the server's answer becomes the flow's, every byte of
    it; the relay's server is not used, and the request stays as the client
    sent it (the flow shows the gateway's route)."""
    addon, tctx = context
    answer = b'{"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}'
    seen: list[tuple[bytes, bytes]] = []

    async def check(port: int) -> None:
        flow = post_to(tctx, addon, port)
        await addon.request(flow)
        addon.relay.close()
        assert isinstance(flow.response, http.Response)
        assert flow.response.status_code == 200 and flow.response.raw_content == answer
        assert flow.response.headers["mcp-session-id"] == "s-9"
        assert flow.response.headers["content-length"] == str(len(answer))
        assert addon.relay.port == 0  # never started
        assert flow.request.path == "/api/mcp-gateway/fs/rpc?k=1"
        assert "x-obsmask-gateway-server" not in flow.request.headers

    asyncio.run(serving(answers_json(answer, seen, b"s-9"), check))
    [(head, body)] = seen
    assert head.startswith(b"POST /mcp?k=1 HTTP/1.1") and body == TOOLS_LIST


def test_an_http2_clients_post_goes_through_the_relay(context):
    """An HTTP/2 client gives up by resetting its stream, which no hook sees
    while a call waits; through the relay, mitmproxy closes the relay's
    connection then, and the server sees its client leave."""
    addon, tctx = context

    async def main() -> None:
        flow = post_to(tctx, addon, 9)
        flow.request.http_version = "HTTP/2.0"
        await addon.request(flow)
        addon.relay.close()
        assert flow.response is None
        assert (flow.request.host, flow.request.port) == ("127.0.0.1", addon.relay.port)
        assert PARKED_HEADER not in flow.request.headers

    asyncio.run(main())


def test_an_http3_clients_post_goes_through_the_relay(context):
    """HTTP/3 streams are reset like HTTP/2's: only HTTP/1 POSTs are called
    from the hook."""
    addon, tctx = context

    async def main() -> None:
        flow = post_to(tctx, addon, 9)
        flow.request.http_version = "HTTP/3"
        await addon.request(flow)
        addon.relay.close()
        assert flow.response is None
        assert (flow.request.host, flow.request.port) == ("127.0.0.1", addon.relay.port)

    asyncio.run(main())


@pytest.mark.parametrize("option, value", [
    ("modify_body", ["|~u mcp-gateway|tools/list|tools/call"]),
    ("intercept_active", True),
])
def test_with_a_later_addon_on_a_post_goes_through_the_relay_after_it(context, option, value):
    """mitmproxy's own addons (modify_body, intercept, replay...) act on a
    request after obsmask's hook: with one of them on, the call is not made
    from the hook, where it would leave before they acted; the flow goes to
    the relay, and mitmproxy sends it there once they have."""
    addon, tctx = context
    tctx.master.addons.add(ModifyBody(), Intercept())

    async def main() -> None:
        flow = post_to(tctx, addon, 9)
        tctx.options.update(**{option: value})
        await addon.request(flow)
        addon.relay.close()
        assert flow.response is None
        assert (flow.request.host, flow.request.port) == ("127.0.0.1", addon.relay.port)

    asyncio.run(main())


def test_a_post_whose_server_is_down_gets_the_gateways_error(context, caplog):
    addon, tctx = context

    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        flow = post_to(tctx, addon, port)
        with caplog.at_level(logging.WARNING):
            await addon.request(flow)
        addon.relay.close()
        assert flow.response is not None and flow.response.status_code == 200
        error = json.loads(flow.response.content)["error"]
        assert error["code"] == UPSTREAM_UNREACHABLE and "cannot connect" in error["message"]
        assert flow.metadata[METADATA_KEY]["gateway_error"] == UPSTREAM_UNREACHABLE
        assert any("JSON-RPC error -32052" in r.getMessage() for r in caplog.records)

    asyncio.run(main())


def test_a_post_whose_client_leaves_cancels_the_call(context):
    """mitmproxy tells no hook that a client left: the addon looks, and
    cancels the call, which closes the server's connection, long before the
    gateway's timeout."""
    addon, tctx = context
    asked, closed = asyncio.Event(), asyncio.Event()

    async def check(port: int) -> None:
        flow = post_to(tctx, addon, port)
        flow.client_conn.state = ConnectionState.OPEN
        hook = asyncio.ensure_future(addon.request(flow))
        await asyncio.wait_for(asked.wait(), 5)
        flow.client_conn.state = ConnectionState.CAN_WRITE  # it closed its side
        await asyncio.wait_for(closed.wait(), 2)
        await asyncio.wait_for(hook, 2)
        addon.relay.close()
        assert flow.response is None

    asyncio.run(serving(waits_for_its_end(asked, closed), check))


def test_an_event_stream_answer_is_fetched_through_the_relay(context):
    """An answer that is an event stream must pass on as it comes: the flow
    goes to the relay, which holds the stream under the flow's token."""
    addon, tctx = context

    async def check(port: int) -> None:
        flow = post_to(tctx, addon, port)
        await addon.request(flow)
        parked = addon.relay.parked()
        addon.relay.close()
        assert flow.response is None and parked == 1
        assert (flow.request.host, flow.request.port) == ("127.0.0.1", addon.relay.port)
        assert flow.request.headers[PARKED_HEADER]

    asyncio.run(serving(waits_for_its_end(asyncio.Event(), asyncio.Event(), STREAM_HEAD), check))


def test_a_replayed_gateway_flow_is_not_sent_again(context):
    """mitmdump -nr fires the request hook for flows that carry their answer:
    the gateway must not run a recorded tool call again."""
    addon, tctx = context
    tctx.configure(addon.mcp, mcpmask_gateway_servers=["dead=http://127.0.0.1:1/"])
    flow = mcp_flow(response_message(), path="/api/mcp-gateway/dead/rpc")
    recorded = flow.response
    run_hooks(addon, flow)
    assert flow.response is recorded and METADATA_KEY in flow.metadata
    assert TRUNCATION_MARK.encode() in flow.response.content


def test_a_relay_failure_is_recorded_and_its_header_kept_from_the_client(context):
    addon, _ = context
    body = (b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32052, "message": '
            b'"obsmask gateway: cannot connect to http://127.0.0.1:1/"}}')
    flow = mcp_flow(body, path="/api/mcp-gateway/fs/rpc")
    flow.metadata[METADATA_KEY] = {"gateway_server": "fs"}
    flow.response.headers["x-obsmask-gateway-error"] = "-32052"
    addon.response(flow)
    assert "x-obsmask-gateway-error" not in flow.response.headers
    assert flow.metadata[METADATA_KEY]["gateway_error"] == -32052
    assert "cannot connect to http://127.0.0.1:1/" in flow.comment
    # The same header from some other server is none of obsmask's business.
    other = mcp_flow(body)
    other.response.headers["x-obsmask-gateway-error"] = "-32052"
    addon.response(other)
    assert other.response.headers["x-obsmask-gateway-error"] == "-32052"


# Clients outside the loopback ---------------------------------------------------------

REMOTE = ("192.0.2.7", 5000)  # TEST-NET-1: no traffic is sent anywhere


def remote_flow(method: bytes = b"POST", content: bytes = b"") -> http.HTTPFlow:
    flow = tflow.tflow(req=tutils.treq(method=method, path=b"/api/mcp-gateway/fs/rpc",
                                       content=content))
    flow.client_conn.peername = REMOTE
    return flow


def test_a_client_outside_the_loopback_is_refused_with_a_jsonrpc_error(context, caplog):
    """The gateway reaches the MCP servers behind it (local ones too): a
    client that is not on the loopback gets an error of its own, in one log
    line, and the flow goes nowhere."""
    addon, tctx = context
    tctx.configure(addon.mcp, mcpmask_gateway_servers=["fs=http://127.0.0.1:8004/mcp"])
    flow = remote_flow(content=b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}')
    with caplog.at_level(logging.INFO):
        asyncio.run(addon.request(flow))
    assert isinstance(flow.response, http.Response) and flow.response.status_code == 200
    answer = json.loads(flow.response.content)
    assert answer["id"] == 7 and answer["error"]["code"] == CLIENT_NOT_ALLOWED == -32056
    assert "client 192.0.2.7 is not on the loopback" in answer["error"]["message"]
    assert "mcpmask_gateway_allow_clients" in answer["error"]["message"]
    assert (flow.request.host, flow.request.port) != ("127.0.0.1", addon.relay.port)
    assert flow.metadata[METADATA_KEY]["gateway_error"] == CLIENT_NOT_ALLOWED
    [line] = [r.getMessage() for r in caplog.records if "192.0.2.7" in r.getMessage()]
    assert "JSON-RPC error -32056" in line


def test_a_refused_request_without_an_id_gets_http_403(context):
    addon, _ = context
    flow = remote_flow(method=b"GET")
    asyncio.run(addon.request(flow))
    assert flow.response is not None and flow.response.status_code == 403
    assert json.loads(flow.response.content)["error"]["code"] == CLIENT_NOT_ALLOWED


def test_networks_in_allow_clients_may_use_the_gateway(context):
    addon, tctx = context
    tctx.configure(addon.mcp, mcpmask_gateway_allow_clients=["192.0.2.0/24"])
    flow = remote_flow(content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')
    asyncio.run(addon.request(flow))
    assert flow.response is not None
    assert json.loads(flow.response.content)["error"]["code"] == UNKNOWN_SERVER  # let through


def test_a_wrong_network_in_allow_clients_is_refused(context):
    addon, tctx = context
    with pytest.raises(exceptions.OptionsError, match="'nope' is not an IP address"):
        tctx.configure(addon.mcp, mcpmask_gateway_allow_clients=["nope"])


@pytest.mark.parametrize(("address", "allowed"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("::ffff:127.0.0.1", True),
    ("192.0.2.7", False), ("::ffff:192.0.2.7", False), ("2001:db8::1", False),
    ("fe80::1%eth0", False), ("not an address", False),
])
def test_only_the_loopback_is_allowed_by_default(address, allowed):
    assert client_allowed(address, ()) is allowed


def stream_large_bodies_on(tctx) -> None:
    tctx.master.addons.add(Proxyserver())  # the option's owner
    tctx.options.update(stream_large_bodies="1k")


def test_with_streaming_on_a_post_goes_to_the_relay_from_its_headers_and_stays_if_streamed(
        context):
    """With stream_large_bodies on, mitmproxy may stream a body before the
    request hook (from its headers, or once it has buffered that much):
    the flow points at the relay once its headers are in, and the request
    hook leaves a streamed one there."""
    addon, tctx = context

    async def main() -> None:
        flow = post_to(tctx, addon, 9)
        stream_large_bodies_on(tctx)
        address = (flow.request.host, flow.request.port)
        await addon.requestheaders(flow)
        assert (flow.request.host, flow.request.port) != address
        flow.request.stream = True  # as mitmproxy sets it, early or late
        await addon.request(flow)
        addon.relay.close()
        assert flow.response is None
        assert (flow.request.host, flow.request.port) == ("127.0.0.1", addon.relay.port)
        assert flow.metadata[METADATA_KEY]["gateway_body_streamed"] is True

    asyncio.run(main())


def test_with_streaming_on_a_post_buffered_whole_is_taken_back_and_answered_in_one_hop(
        context):
    """The request hook brings a body mitmproxy did not stream back to its
    route: the server gets it in one hop, without the relay's headers, and
    the flow keeps the gateway's address."""
    addon, tctx = context
    answer = b'{"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}'
    seen: list[tuple[bytes, bytes]] = []

    async def check(port: int) -> None:
        flow = post_to(tctx, addon, port)
        stream_large_bodies_on(tctx)
        address = (flow.request.scheme, flow.request.host, flow.request.port)
        await addon.requestheaders(flow)
        await addon.request(flow)
        addon.relay.close()
        assert isinstance(flow.response, http.Response) and flow.response.raw_content == answer
        assert (flow.request.scheme, flow.request.host, flow.request.port) == address
        assert "x-obsmask-gateway-server" not in flow.request.headers
        assert "gateway_body_streamed" not in flow.metadata[METADATA_KEY]

    asyncio.run(serving(answers_json(answer, seen, b"s-9"), check))
    [(head, body)] = seen
    assert b"x-obsmask" not in head.lower() and body == TOOLS_LIST


def test_with_streaming_on_a_post_the_gateway_refuses_goes_to_the_relay_or_is_answered(context):
    """A refused request goes to the relay too, never to the proxy's own
    destination: the relay answers the error of a streamed one (and is told
    when the client is not served: it knows servers, not clients); one
    buffered whole is taken back and answered here."""
    addon, tctx = context

    async def main() -> None:
        post_to(tctx, addon, 9)
        stream_large_bodies_on(tctx)
        flow = tflow.tflow(req=tutils.treq(method=b"POST", path=b"/api/mcp-gateway/nope/rpc",
                                           content=TOOLS_LIST))
        address = (flow.request.host, flow.request.port)
        await addon.requestheaders(flow)
        assert (flow.request.host, flow.request.port) == ("127.0.0.1", addon.relay.port)
        assert REFUSED_HEADER not in flow.request.headers  # the relay knows no "nope"
        await addon.request(flow)
        assert (flow.request.host, flow.request.port) == address
        assert flow.response is not None
        assert json.loads(flow.response.content)["error"]["code"] == UNKNOWN_SERVER

        elsewhere = post_to(tctx, addon, 9)
        elsewhere.client_conn.peername = ("192.0.2.7", 4000)
        await addon.requestheaders(elsewhere)
        addon.relay.close()
        assert elsewhere.request.headers[REFUSED_HEADER] == "1"
        assert "gateway_upstream" not in elsewhere.metadata[METADATA_KEY]

    asyncio.run(main())
