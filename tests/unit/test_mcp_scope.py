"""Which traffic is MCP (obsmask_core.mcp.methods and obsmask_core.mcp.scope):
an ``eth_`` method is not, ``tools/call`` is, a batch mixing them has its
MCP responses told by id, the transport's headers make a flow MCP, and a
GET stream with no header is decided by its first event that tells. A
tools/call request names its tool, by which its response gets its limit."""

from __future__ import annotations

import json

import pytest

from obsmask_core.mcp.cut import truncate_jsonrpc_text
from obsmask_core.mcp.jsonrpc_scan import scan_jsonrpc
from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.mcp.methods import (
    MCP_METHODS,
    MCP_NOTIFICATION_METHODS,
    MCP_REQUEST_METHODS,
    is_mcp_method,
)
from obsmask_core.mcp.scope import (
    EVERY_RESPONSE,
    McpAnswers,
    StreamDecision,
    answers_to_request,
    canonical_id,
    has_mcp_header,
    tools_called,
)
from obsmask_core.mcp.sse_rewrite import SseTruncator, truncate_sse_body
from obsmask_core.shared.truncation import TRUNCATION_MARK

LONG = "0x" + "ab" * 10_000  # an eth_getCode answer: 20,002 characters
LIMITS = TruncationLimits()
# The methods named in the issue, all of which must count as MCP.
NAMED_IN_THE_ISSUE = (
    "initialize", "ping", "tools/list", "tools/call", "resources/list",
    "resources/templates/list", "resources/read", "resources/subscribe",
    "resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete",
    "logging/setLevel", "sampling/createMessage", "elicitation/create", "roots/list",
    "tasks/get", "tasks/result", "tasks/list", "tasks/cancel",
    "notifications/initialized", "notifications/cancelled", "notifications/progress",
    "notifications/message", "notifications/tools/list_changed",
    "notifications/resources/updated", "notifications/roots/list_changed",
)


def request(method: str, message_id: int | None = 1) -> dict[str, object]:
    message: dict[str, object] = {"jsonrpc": "2.0", "method": method, "params": {}}
    if message_id is not None:
        message["id"] = message_id
    return message


def response(message_id: int | str, result: object = LONG) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": message_id, "result": result}


def answers_of(body: object) -> McpAnswers | None:
    return answers_to_request(scan_jsonrpc(json.dumps(body)))


# methods.py ---------------------------------------------------------------------


@pytest.mark.parametrize("method", NAMED_IN_THE_ISSUE)
def test_every_method_of_the_spec_is_mcp(method):
    assert is_mcp_method(method) and method in MCP_METHODS


@pytest.mark.parametrize("method", ["eth_getCode", "eth_call", "textDocument/hover",
                                    "tools.call", "Tools/call", "", None])
def test_other_methods_are_not_mcp(method):
    assert not is_mcp_method(method)


def test_requests_and_notifications_are_told_apart():
    assert not MCP_REQUEST_METHODS & MCP_NOTIFICATION_METHODS
    assert all(m.startswith("notifications/") for m in MCP_NOTIFICATION_METHODS)
    assert not any(m.startswith("notifications/") for m in MCP_REQUEST_METHODS)


# The decision from a request ------------------------------------------------------


def test_an_eth_method_is_not_mcp():
    assert answers_of(request("eth_getCode")) is None
    assert answers_of([request("eth_getCode", 1), request("eth_call", 2)]) is None


def test_tools_call_is_mcp_and_all_its_responses_are():
    assert answers_of(request("tools/call")) is EVERY_RESPONSE
    assert answers_of(request("notifications/initialized", None)) is EVERY_RESPONSE


def test_a_batch_mixing_methods_cuts_only_the_mcp_responses():
    answers = answers_of([request("eth_getCode", 1), request("tools/call", "b"),
                          request("notifications/progress", None)])
    assert answers == McpAnswers(frozenset({'"b"'}))
    # The response spells the id otherwise: the same id by value.
    batch = json.dumps([response(1), response("b"), response(3)]).replace(
        '"id": "b"', '"id": "\\u0062"')
    cut = truncate_jsonrpc_text(batch, LIMITS, answers=answers)
    assert cut.text is not None and [c.message for c in cut.cuts] == [1]
    values = json.loads(cut.text)
    assert values[0]["result"] == LONG and values[2]["result"] == LONG
    assert TRUNCATION_MARK in values[1]["result"]


def test_a_body_that_is_not_json_rpc_is_not_mcp():
    assert answers_to_request(scan_jsonrpc('{"method": "tools/call"}')) is None
    assert answers_to_request(scan_jsonrpc("[not json")) is None


def test_ids_are_compared_by_value():
    assert canonical_id('"\\u0061"') == canonical_id('"a"') != canonical_id("1")
    assert canonical_id("not json") == "not json"


def test_the_transport_headers_make_a_flow_mcp():
    assert has_mcp_header({"mcp-session-id"}) and has_mcp_header({"mcp-protocol-version"})
    assert has_mcp_header({"mcp-method"})
    assert not has_mcp_header({"content-type", "authorization"})


# The decision on a GET stream -------------------------------------------------------


def scan(message: object) -> object:
    return scan_jsonrpc(json.dumps(message))


@pytest.mark.parametrize(
    ("first", "is_mcp"),
    [
        (request("notifications/message", None), True),
        (request("sampling/createMessage", 7), True),
        (request("eth_subscription", None), False),
        (response(5), True),  # an id an MCP request used
        (response(6), False),
    ],
)
def test_a_stream_is_decided_by_its_first_json_rpc_message(first, is_mcp):
    decision = StreamDecision(lambda request_id: request_id == "5")
    decision.message(scan({"not": "json-rpc"}))  # tells nothing
    assert decision.is_mcp is None
    decision.message(scan(first))
    assert decision.is_mcp is is_mcp
    decision.message(scan(request("tools/call")))  # decided once
    assert decision.is_mcp is is_mcp


def test_the_legacy_endpoint_event_makes_a_stream_mcp():
    decision = StreamDecision()
    decision.event_type("message")
    assert decision.is_mcp is None
    decision.event_type("endpoint")
    assert decision.is_mcp is True


def event(message: object, name: str = "message") -> bytes:
    return f"event: {name}\r\ndata: {json.dumps(message)}\r\n\r\n".encode()


LEGACY_STREAM = (b"event: endpoint\r\ndata: /messages/?session_id=abc\r\n\r\n"
                 + event(response(3)))
ETH_STREAM = (b": hello\n\n" + event(request("eth_subscription", None))
              + event(response(3)) + b"data: " + json.dumps(response(4)).encode() + b"\n\n")


def fed(truncator: SseTruncator, stream: bytes, size: int) -> bytes:
    out = [piece for start in range(0, len(stream), size)
           for piece in truncator.feed(stream[start : start + size])]
    return b"".join(out + truncator.finish())


@pytest.mark.parametrize("size", [1, 7, 1000, 1 << 20])
def test_a_legacy_stream_is_cut_and_an_eth_stream_passes_byte_for_byte(size):
    legacy = SseTruncator(LIMITS, decision=StreamDecision())
    out = fed(legacy, LEGACY_STREAM, size)
    assert legacy.decision is not None and legacy.decision.is_mcp
    assert TRUNCATION_MARK.encode() in out and len(out) < 5000
    eth = SseTruncator(LIMITS, decision=StreamDecision())
    assert fed(eth, ETH_STREAM, size) == ETH_STREAM
    assert eth.passing and not eth.take_cuts()


def test_a_buffered_stream_is_decided_the_same_way():
    assert truncate_sse_body(ETH_STREAM, LIMITS, decision=StreamDecision()).body is None
    cut = truncate_sse_body(LEGACY_STREAM, LIMITS, decision=StreamDecision())
    assert cut.body is not None and TRUNCATION_MARK.encode() in cut.body


def test_each_tools_call_request_names_its_tool_by_its_id():
    """The tool of a tools/call request is its params.name (a string, at the
    top of params: not a "name" among the arguments), by the request's id;
    other methods, notifications and names that are not strings name none."""
    body = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": "read_file", "arguments": {"name": "not this"}}},
        {"jsonrpc": "2.0", "id": "b", "method": "tools/call",
         "params": {"arguments": {"name": "nor this"}, "name": "search"}},
        {"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "a prompt"}},
        {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "a notification"}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": 7}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": ["read_file"]},
    ]
    text = json.dumps(body).replace('"search"', '"sea\\u0072ch"')
    assert tools_called(scan_jsonrpc(text)) == {"1": "read_file", '"b"': "search"}
