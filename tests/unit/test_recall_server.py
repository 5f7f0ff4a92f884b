"""The recall server (``recall/server.py``): an MCP server with one tool. It
answers initialize, tools/list and tools/call like any MCP server; a
conversation id gets the stub, a stored id its text, and whatever it cannot
serve gets a JSON-RPC error that says why, never an exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.recall.server import (
    INVALID_PARAMS,
    MAX_LINE,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    PROTOCOL_VERSIONS,
    STORE_FAILED,
    answer_post,
)
from obsmask_core.recall.store import StoredText, StoreError
from obsmask_core.shared.recall_text import RecallQuery, find_stub, store_id

LONG = "".join(f"row {n}: value {n * n}\n" for n in range(1, 501))
CUT_ID = store_id(LONG)
STORE = {CUT_ID: StoredText(LONG, 1.0)}


def post(message: object, lookup=STORE.get) -> tuple[int, object]:
    answer = answer_post(json.dumps(message).encode(), lookup, 7)
    return answer.status, json.loads(answer.body) if answer.body else None


def call(arguments: object, lookup=STORE.get, name: str = "recall") -> dict[str, object]:
    status, reply = post({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                          "params": {"name": name, "arguments": arguments}}, lookup)
    assert status == 200 and isinstance(reply, dict) and reply["id"] == 5
    return reply


def text(reply: dict[str, object]) -> str:
    result = reply["result"]
    assert isinstance(result, dict)
    (block,) = result["content"]
    return block["text"]


def test_initialize_gets_the_asked_version_and_the_tools_capability():
    """A known protocol version is answered with itself; an unknown one with
    the newest the server speaks; the server says it has tools."""
    for asked, expected in (("2025-06-18", "2025-06-18"), ("1999-01-01", PROTOCOL_VERSIONS[0])):
        _, reply = post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"protocolVersion": asked, "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}}})
        assert reply["result"]["protocolVersion"] == expected
        assert "tools" in reply["result"]["capabilities"]


def test_a_notification_is_accepted_with_no_body():
    """notifications/initialized gets 202 Accepted and nothing else."""
    answer = answer_post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', None, 7)
    assert (answer.status, answer.body) == (202, b"")


def test_tools_list_offers_recall_with_its_arguments():
    """The one tool is recall, taking an id and optionally lines or a pattern."""
    _, reply = post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    (tool,) = reply["result"]["tools"]
    assert tool["name"] == "recall"
    assert tool["inputSchema"]["required"] == ["id"]
    assert set(tool["inputSchema"]["properties"]) == {"id", "first_line", "last_line",
                                                      "pattern"}


def test_a_conversation_id_is_answered_with_the_stub_naming_it():
    """A tool call id is answered with the stub that conversation masking
    replaces in the next request; the stub carries the range asked for."""
    reply = call({"id": "toolu_01A", "first_line": 3, "last_line": 8})
    assert find_stub(text(reply)) == RecallQuery("toolu_01A", 3, 8)


def test_the_largest_line_number_the_tool_takes_still_gives_a_stub_found_again():
    """Every line number the tool accepts fits in its stub: the stub is
    always replaced in the next request."""
    reply = call({"id": "call_0", "first_line": 5, "last_line": MAX_LINE})
    assert find_stub(text(reply)) == RecallQuery("call_0", 5, MAX_LINE)
    assert call({"id": "call_0", "last_line": MAX_LINE + 1})["error"]["code"] == INVALID_PARAMS


def test_a_stored_id_is_answered_with_the_whole_text_or_the_lines_asked_for():
    """A cut string's id gets the whole string back, identical; with a range,
    those lines; with a pattern, the numbered lines that hold it."""
    assert text(call({"id": CUT_ID})) == LONG
    assert text(call({"id": CUT_ID, "first_line": 10, "last_line": 11})) == (
        "row 10: value 100\nrow 11: value 121\n")
    assert text(call({"id": CUT_ID, "pattern": "value 250000"})) == "500: row 500: value 250000\n"


def test_an_unknown_or_expired_stored_id_is_a_json_rpc_error_that_says_so():
    """An id the store no longer holds gets error -32602 saying it expired or
    was pushed out, and how long strings are kept."""
    reply = call({"id": store_id("never cut")})
    assert reply["error"]["code"] == INVALID_PARAMS
    assert "expired" in reply["error"]["message"] and "7 days" in reply["error"]["message"]


def test_a_failing_store_is_a_json_rpc_error_not_an_exception():
    """A store that cannot be read gives an error answer naming the failure."""
    def broken(_recall_id: str) -> StoredText | None:
        raise StoreError("recall.sqlite3: disk I/O error")
    reply = call({"id": CUT_ID}, lookup=broken)
    assert reply["error"]["code"] == STORE_FAILED and "disk I/O" in reply["error"]["message"]


@pytest.mark.parametrize("arguments", [
    {}, {"id": ""}, {"id": "has space"}, {"id": 7}, {"id": "a", "first_line": 0},
    {"id": "a", "first_line": "3"}, {"id": "a", "first_line": True},
    {"id": "a", "first_line": 5, "last_line": 2}, {"id": "a", "pattern": ""},
    {"id": "a", "pattern": "é" * 1000},
    {"id": "a", "colour": "red"},
])
def test_wrong_arguments_are_invalid_params(arguments):
    """Arguments the tool does not take are refused with -32602, naming them."""
    assert call(arguments)["error"]["code"] == INVALID_PARAMS


def test_another_tool_or_method_is_refused():
    """A call of a tool other than recall, or a method the server lacks, is an
    error answer."""
    assert call({"id": "a"}, name="bash")["error"]["code"] == INVALID_PARAMS
    _, reply = post({"jsonrpc": "2.0", "id": 9, "method": "resources/list"})
    assert reply["error"]["code"] == METHOD_NOT_FOUND


def test_a_batch_gets_one_answer_per_request():
    """A batch of a request and a notification gets one answer, for the request."""
    status, reply = post([{"jsonrpc": "2.0", "id": 1, "method": "ping"},
                          {"jsonrpc": "2.0", "method": "notifications/initialized"}])
    assert status == 200 and reply == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


@given(st.binary(max_size=300))
def test_any_bytes_get_an_answer_never_an_exception(body):
    """Whatever is posted, the server answers (an error when it is not
    JSON-RPC it understands) and raises nothing."""
    answer = answer_post(body, STORE.get, 7)
    assert answer.status in (200, 202, 400)
    if answer.status == 400:
        assert json.loads(answer.body)["error"]["code"] in (PARSE_ERROR, -32600)


# The stateless protocol era (2026-07-28) ------------------------------------------------

MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


def test_a_modern_client_discovers_the_server_instead_of_initializing():
    status, reply = post({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                          "params": {"_meta": MODERN}})
    assert status == 200 and isinstance(reply, dict)
    result = reply["result"]
    assert result["supportedVersions"] == ["2026-07-28"]
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "obsmask"
    # A probe with no version is one of the handshake era: no such method.
    _, reply = post({"jsonrpc": "2.0", "id": 2, "method": "server/discover"})
    assert reply["error"]["code"] == METHOD_NOT_FOUND


def test_every_result_of_the_modern_era_says_it_is_complete_and_lists_are_cacheable():
    status, listed = post({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
                           "params": {"_meta": MODERN}})
    assert status == 200
    assert listed["result"]["resultType"] == "complete"
    assert (listed["result"]["ttlMs"], listed["result"]["cacheScope"]) == (0, "private")
    _, called = post({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                           "params": {"name": "recall", "arguments": {"id": CUT_ID},
                                      "_meta": MODERN}})
    assert called["result"]["resultType"] == "complete"
    assert called["result"]["content"][0]["text"] == LONG
    # The handshake era's results stay as they were.
    _, old = post({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
    assert "resultType" not in old["result"] and "ttlMs" not in old["result"]


def test_a_version_the_server_does_not_speak_is_refused_with_the_ones_it_does():
    _, reply = post({"jsonrpc": "2.0", "id": 6, "method": "server/discover",
                          "params": {"_meta": {"io.modelcontextprotocol/protocolVersion":
                                               "2099-01-01"}}})
    error = reply["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}
