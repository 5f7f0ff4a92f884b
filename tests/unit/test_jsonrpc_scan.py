"""Reading JSON-RPC 2.0 texts (``mcp/jsonrpc_scan.py``): which strings may be
cut (those in a response's ``result`` and ``error.data``, at any depth, but
never under a protected key, never an image's or audio's base64 data, never
``jsonrpc``, ``id``, ``error.code`` or ``error.message``), batches message by
message, requests and notifications never, and a text that is not JSON-RPC
not at all. Checked through ``truncate_jsonrpc_text``, which cuts what the
scan finds."""

from __future__ import annotations

import json

import pytest

from obsmask_core.mcp.cut import truncate_jsonrpc_body, truncate_jsonrpc_text
from obsmask_core.mcp.jsonrpc_scan import scan_jsonrpc
from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.mcp.protected_keys import BINARY_CONTENT_TYPES, PROTECTED_KEYS
from support.mcp_messages import (
    DEFAULTS,
    LONG,
    MEGABYTE,
    error_response,
    expected_cut,
    numbered,
    response,
    text_block,
    truncated,
)

# Where strings are cut ------------------------------------------------------------------


def test_a_result_that_is_itself_a_long_string_is_cut():
    """Every string longer than max_chars inside ``result`` is cut, the result
    itself included when it is a string."""
    original = numbered(6000)
    assert truncated(response(original)) == response(expected_cut(original))


def test_error_data_is_cut_but_code_and_message_are_not():
    """Strings inside ``error.data`` are cut; ``error.code`` and
    ``error.message`` are never touched (even a 1 MB message)."""
    message_text = numbered(MEGABYTE, "m")
    data_text, nested = numbered(7000, "d"), numbered(8000, "n")
    out = truncated(error_response({"code": -32603, "message": message_text, "data": data_text}))
    assert out == error_response(
        {"code": -32603, "message": message_text, "data": expected_cut(data_text)}
    )
    out = truncated(error_response(
        {"code": -32000, "message": message_text, "data": {"trace": [nested], "n": 1}}
    ))
    assert out["error"]["message"] == message_text
    assert out["error"]["data"] == {"trace": [expected_cut(nested)], "n": 1}
    # Long strings elsewhere in an error are not error.data: left alone.
    outcome = truncate_jsonrpc_text(
        json.dumps(error_response({"code": 1, "message": "m", "other": data_text})), DEFAULTS
    )
    assert outcome.scan.problem is None and outcome.text is None


def test_small_max_chars_cuts_any_type_but_image_and_audio():
    """Any string longer than max_chars is cut, a "type" value too under a
    small max_chars; but the types "image" and "audio" stay, else the
    block's base64 data would lose its protection on a second pass
    (idempotence)."""
    limits = TruncationLimits(max_chars=4, head_chars=1, tail_chars=1, marker_template="<x>")
    result = {"content": [{"type": "resource_link", "name": "abcdef"},
                          {"type": "image", "data": "QUJDREVG"}]}
    out = truncated(response(result), limits)
    assert out["result"]["content"] == [{"type": "r<x>k", "name": "a<x>f"},
                                        {"type": "image", "data": "QUJDREVG"}]
    assert truncate_jsonrpc_text(json.dumps(out), limits).text is None


# What is never touched --------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(PROTECTED_KEYS))
def test_each_protected_key_survives_a_megabyte(key):
    """Strings the protocol needs whole are never cut: under each name of the
    constant PROTECTED_KEYS a 1 MB value survives, at any depth, in
    ``result`` and in ``error.data``. The sibling long text in the same
    message is cut, so the rule is at work."""
    big = numbered(MEGABYTE, "p")
    sibling = numbered(5000, "s")
    result = {
        "content": [
            text_block(sibling),
            {"type": "resource", "resource": {key: big, "text": sibling}},
        ],
        key: big,
        "nested": {key: {"inside": [big, {"deeper": big}]}},
    }
    out = truncated(response(result))["result"]
    assert out[key] == big
    assert out["nested"][key] == {"inside": [big, {"deeper": big}]}
    assert out["content"][1]["resource"][key] == big
    assert out["content"][0]["text"] == expected_cut(sibling)
    assert out["content"][1]["resource"]["text"] == expected_cut(sibling)
    # ... and inside error.data as well.
    out = truncated(error_response({"code": 1, "message": "m",
                                    "data": {key: big, "detail": sibling}}))
    assert out["error"]["data"] == {key: big, "detail": expected_cut(sibling)}


def test_the_protected_list_holds_what_the_protocol_needs_whole():
    """The protected names cover what MCP needs whole: the blob of resources,
    uri, mimeType, nextCursor and the other cursor, everything under _meta;
    and the types whose "data" is base64 are image and audio."""
    assert isinstance(PROTECTED_KEYS, frozenset)
    assert {"blob", "uri", "mimeType", "nextCursor", "cursor", "_meta"} <= PROTECTED_KEYS
    assert BINARY_CONTENT_TYPES == {"image", "audio"}


@pytest.mark.parametrize("content_type", sorted(BINARY_CONTENT_TYPES))
@pytest.mark.parametrize("type_first", [True, False], ids=["type-first", "data-first"])
def test_base64_data_of_image_and_audio_survives_a_megabyte(content_type, type_first):
    """The base64 data of image and audio content is never cut, whether the
    block's "type" comes before or after its "data"; a "data" member
    elsewhere (here in a text block) is ordinary text and is cut."""
    big = "QUJD" * (MEGABYTE // 4)
    sibling = numbered(5000)
    block = ({"type": content_type, "data": big, "mimeType": "image/png"} if type_first
             else {"data": big, "mimeType": "image/png", "type": content_type})
    out = truncated(response({"content": [block, text_block(sibling),
                                          {"type": "text", "data": sibling}]}))
    assert out["result"]["content"] == [
        block, text_block(expected_cut(sibling)), {"type": "text", "data": expected_cut(sibling)},
    ]


def test_jsonrpc_id_and_is_error_are_never_touched():
    """The envelope is never touched: ``jsonrpc``, ``id`` (a 1 MB string id
    included) and ``isError`` stay as they came."""
    long_id = numbered(MEGABYTE, "i")
    sibling = numbered(5000)
    message = {"jsonrpc": "2.0", "id": long_id,
               "result": {"content": [text_block(sibling)], "isError": True}}
    out = truncated(message)
    assert out == {"jsonrpc": "2.0", "id": long_id,
                   "result": {"content": [text_block(expected_cut(sibling))], "isError": True}}


# Depth ---------------------------------------------------------------------------------


@pytest.mark.parametrize("container", ["array", "object"])
def test_a_hundred_thousand_levels_of_nesting_are_read(container):
    """The scan is a loop, not a recursion: 100 000 levels of nesting (far
    past Python's recursion limit) are read, and one closer too many is
    still found. How long that takes is bench_mcp_truncation's to say."""
    depth = 100_000
    original = numbered(9000)
    opener, closer = ("[", "]") if container == "array" else ('{"k":', "}")
    prefix = '{"jsonrpc":"2.0","id":1,"result":' + opener * depth
    suffix = closer * depth + "}"
    outcome = truncate_jsonrpc_text(prefix + json.dumps(original) + suffix, DEFAULTS)
    assert outcome.scan.problem is None
    assert outcome.text == prefix + json.dumps(expected_cut(original)) + suffix
    # One level too many closers is still caught, without recursion.
    bad = truncate_jsonrpc_text(prefix + '"x"' + suffix + closer, DEFAULTS)
    assert bad.text is None and bad.scan.problem is not None


# Batches ----------------------------------------------------------------------------


def test_a_batch_is_handled_message_by_message():
    """A batch (a JSON array of messages) is handled message by message: only
    the responses' strings are cut, the notification's and the request's
    params stay whole."""
    long_a, long_b = numbered(6000, "a"), numbered(7000, "b")
    batch = [
        response({"content": [text_block(long_a)]}, id_=1),
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": long_b}},
        {"jsonrpc": "2.0", "id": 2, "method": "sampling/createMessage",
         "params": {"messages": [{"content": text_block(long_b)}]}},
        error_response({"code": 5, "message": long_b, "data": long_b}, id_=3),
    ]
    text = json.dumps(batch)
    outcome = truncate_jsonrpc_text(text, DEFAULTS)
    assert outcome.scan.batch
    assert [m.kind for m in outcome.scan.messages] == [
        "response", "notification", "request", "response",
    ]
    assert outcome.text is not None
    assert json.loads(outcome.text) == [
        response({"content": [text_block(expected_cut(long_a))]}, id_=1),
        batch[1],
        batch[2],
        error_response({"code": 5, "message": long_b, "data": expected_cut(long_b)}, id_=3),
    ]
    assert [cut.message for cut in outcome.cuts] == [0, 3]


@pytest.mark.parametrize(
    "intruder",
    [42, "text", None, [], {"foo": 1}, {"jsonrpc": "1.0", "id": 1, "result": 1},
     {"jsonrpc": "2.0", "id": 1, "result": 1, "error": {"code": 1, "message": "m"}}],
)
def test_a_batch_holding_a_non_message_is_left_alone(intruder):
    """A batch is a JSON array of messages; one that holds anything else is not
    JSON-RPC and passes byte for byte."""
    text = json.dumps([response([numbered(6000)]), intruder])
    outcome = truncate_jsonrpc_text(text, DEFAULTS)
    assert outcome.text is None and outcome.cuts == []
    assert outcome.scan.problem is not None


# Texts that are not JSON-RPC responses -------------------------------------------


NOT_JSONRPC = {
    "not JSON": "hello " + LONG,
    "empty": "",
    "blank": "  \n ",
    "cut short": json.dumps(response([LONG]))[:-1],
    "extra data": json.dumps(response([LONG])) + " {}",
    "two documents": json.dumps(response([LONG])) * 2,
    "missing jsonrpc": json.dumps({"id": 1, "result": [LONG]}),
    "version 1.0": json.dumps({"jsonrpc": "1.0", "id": 1, "result": [LONG]}),
    "version as a number": '{"jsonrpc": 2.0, "id": 1, "result": ["' + LONG + '"]}',
    "result and error": json.dumps({"jsonrpc": "2.0", "id": 1, "result": [LONG],
                                    "error": {"code": 1, "message": "m"}}),
    "no id": json.dumps({"jsonrpc": "2.0", "result": [LONG]}),
    "method and result": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "result": [LONG]}),
    "trailing comma in object": '{"jsonrpc": "2.0", "id": 1, "result": ["' + LONG + '"],}',
    "trailing comma in array": '{"jsonrpc": "2.0", "id": 1, "result": ["' + LONG + '", 1,]}',
    "NaN": '{"jsonrpc": "2.0", "id": 1, "result": ["' + LONG + '", NaN]}',
    "Infinity": '{"jsonrpc": "2.0", "id": 1, "result": ["' + LONG + '", -Infinity]}',
    "single quotes": "{'jsonrpc': '2.0', 'id': 1, 'result': ['" + LONG + "']}",
    "leading zero": '{"jsonrpc": "2.0", "id": 01, "result": ["' + LONG + '"]}',
    "raw newline in a string": '{"jsonrpc": "2.0", "id": 1, "result": ["a\n' + LONG + '"]}',
    "bad escape": '{"jsonrpc": "2.0", "id": 1, "result": ["\\x' + LONG + '"]}',
    "byte order mark": "\ufeff" + json.dumps(response([LONG])),
    "top-level string": json.dumps(LONG),
    "top-level number": "1",
    "empty batch": "[]",
    "nested batch": json.dumps([[response([LONG])]]),
}


@pytest.mark.parametrize("text", NOT_JSONRPC.values(), ids=NOT_JSONRPC.keys())
def test_a_body_that_is_not_jsonrpc_passes_byte_for_byte(text):
    """A body that is not JSON-RPC passes byte for byte: no new text, and a
    reason for the log."""
    outcome = truncate_jsonrpc_text(text, DEFAULTS)
    assert outcome.text is None and outcome.cuts == []
    assert outcome.scan.problem
    body = truncate_jsonrpc_body(text.encode("utf-8"), DEFAULTS)
    assert body.body is None and body.reason == outcome.scan.problem


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {"x": LONG}}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"message": LONG}},
    ],
    ids=["request", "notification"],
)
def test_requests_and_notifications_are_not_cut(message):
    """Only JSON-RPC 2.0 responses (an object with jsonrpc, id and result or
    error) are cut; requests and notifications are not."""
    outcome = truncate_jsonrpc_text(json.dumps(message), DEFAULTS)
    assert outcome.scan.problem is None and outcome.text is None
    body = truncate_jsonrpc_body(json.dumps(message).encode(), DEFAULTS)
    assert body.body is None and body.reason == "no string to cut"


def test_scan_reports_messages_and_spans():
    """scan_jsonrpc tells kinds, batch-ness and where the strings to cut are."""
    text = json.dumps(response({"a": "s" * 30, "b": "t" * 10}))
    scan = scan_jsonrpc(text, 20)
    assert scan.problem is None and not scan.batch and scan.kinds() == {"response"}
    [(start, end, index)] = scan.spans
    assert text[start:end] == json.dumps("s" * 30) and index == 0
    assert scan_jsonrpc(text).spans == []


# The tool a request calls --------------------------------------------------------------


def test_a_requests_params_name_is_read_and_its_params_never_cut():
    """The scan reads the ``name`` at the top of a request's ``params`` (the
    tool of a tools/call), however deep the arguments beside it go, and
    still finds nothing to cut in a request."""
    depth = 100_000
    arguments = '{"path":' + "[" * depth + json.dumps(LONG) + "]" * depth + "}"
    text = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":'
            + arguments + ',"name":"read_file"}}')
    scan = scan_jsonrpc(text, 10)
    assert scan.problem is None and scan.spans == []
    assert [m.params_name for m in scan.messages] == ["read_file"]
    batch = scan_jsonrpc(json.dumps([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ["read_file"]},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": None}},
        {"jsonrpc": "2.0", "id": 3, "result": {"name": "a result"}},
    ]))
    assert [m.params_name for m in batch.messages] == [None, None, None]
