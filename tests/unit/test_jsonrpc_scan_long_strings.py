"""The JSON-RPC scan's long strings (``mcp/jsonrpc_scan.py``,
``long_strings.py``): a string
longer than LONG_STRING_CHARS is read at C speed, not by the regular
expression, and the scan and the cut come out as they would without that:
values with many escaped quotes, escaped lone surrogates, non-ASCII or
``\\uXXXX`` escapes are cut like any other, a broken long string is refused
with the same words, and a long key, id or method is read whole."""

from __future__ import annotations

import json
from unittest import mock

import pytest

from obsmask_core.mcp import jsonrpc_scan
from obsmask_core.mcp.cut import truncate_jsonrpc_text
from obsmask_core.mcp.json_tokens import TOKEN
from obsmask_core.mcp.jsonrpc_message import JsonRpcScan
from obsmask_core.mcp.jsonrpc_scan import scan_jsonrpc
from obsmask_core.mcp.long_strings import LONG_STRING_CHARS
from obsmask_core.shared.truncation import DEFAULT_MARKER, TRUNCATION_MARK, TruncationMarker
from support.mcp_messages import DEFAULTS, expected_cut, numbered, response

LONG = LONG_STRING_CHARS * 20


def slow_scan(text: str, max_chars: int | None = None) -> JsonRpcScan:
    """The scan with the regular expression alone (no string is long)."""
    with mock.patch.object(jsonrpc_scan, "_TOKEN_OR_LONG", TOKEN):
        return scan_jsonrpc(text, max_chars)


def same_scan(text: str, max_chars: int | None = None) -> JsonRpcScan:
    fast, slow = scan_jsonrpc(text, max_chars), slow_scan(text, max_chars)
    assert (fast.problem, fast.batch, fast.messages, fast.spans) == (
        slow.problem, slow.batch, slow.messages, slow.spans)
    return fast


@pytest.mark.parametrize("ensure_ascii", [False, True], ids=["utf-8", "escaped"])
@pytest.mark.parametrize("text", [
    numbered(LONG),
    'say "hi" ' * (LONG // 9),  # far more escaped quotes than str.find looks past
    "C:\\path\\" * (LONG // 8) + '\\"',
    "résumé 日本語 😀\n\t" * (LONG // 14),
    "\ud800 lone " + "x" * LONG,  # JSON allows it escaped; orjson refuses it
], ids=["plain", "quotes", "backslashes", "non-ascii", "lone-surrogate"])
def test_a_long_string_is_cut_like_any_other(text, ensure_ascii):
    body = json.dumps(response({"content": [{"type": "text", "text": text}]}),
                      ensure_ascii=ensure_ascii)
    scan = same_scan(body, DEFAULTS.max_chars)
    start, end, _ = scan.spans[0]
    assert scan.values[start] == text == json.loads(body[start:end])
    outcome = truncate_jsonrpc_text(body, DEFAULTS)
    assert outcome.text is not None
    assert json.loads(outcome.text)["result"]["content"][0]["text"] == expected_cut(text)


@pytest.mark.parametrize("broken", [
    '"' + "x" * LONG + "\x01" + '"',  # a raw control character
    '"' + "x" * LONG + "\\x" + '"',  # an escape JSON does not have
    '"' + "x" * LONG + "\\u12" + '"',
    '"' + "x" * LONG,  # never closed
    '"' + "x" * LONG + '\\"',  # its last quote escaped
], ids=["control", "escape", "short-unicode", "unclosed", "escaped-end"])
def test_a_broken_long_string_is_refused_with_the_same_words(broken):
    text = '{"jsonrpc": "2.0", "id": 1, "result": {"text": ' + broken + "}}"
    scan = same_scan(text, 100)
    assert scan.problem is not None and scan.problem.startswith("not valid JSON")


def test_a_long_key_id_and_method_are_read_whole():
    key, name = "k" * LONG, "tool-" + "é" * LONG
    request = json.dumps({"jsonrpc": "2.0", "id": "i" * LONG, "method": "m" * LONG,
                          "params": {"name": name, key: 1}}, ensure_ascii=False)
    scan = same_scan(request)
    message = scan.messages[0]
    assert (message.method, message.params_name, message.kind) == ("m" * LONG, name, "request")
    assert message.id_text == json.dumps("i" * LONG)


def test_long_strings_that_are_not_cut_are_left_out_of_the_values():
    """Only the strings to cut keep their value (the rest would hold memory
    for nothing): a long blob, image data, error message."""
    body = json.dumps(response({"content": [
        {"type": "image", "data": "QUJD" * LONG, "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "file:///a", "blob": "QUJD" * LONG}},
        {"type": "text", "text": numbered(LONG)},
    ]}))
    scan = same_scan(body, DEFAULTS.max_chars)
    assert len(scan.spans) == 1 and list(scan.values) == [scan.spans[0][0]]


def test_the_marker_is_found_only_where_its_words_are():
    """The marker's longest literal is looked for before its pattern: a
    text without it has no marker, one with a whole marker has one."""
    marker = DEFAULT_MARKER.render(100, 10, 10)
    assert DEFAULT_MARKER.found_in("x" * LONG + marker + "y")
    assert not DEFAULT_MARKER.found_in("x" * LONG + TRUNCATION_MARK + "y")
    assert DEFAULT_MARKER.read("x" * LONG) is None
    custom = TruncationMarker("<{head}|{tail} cut of {original_chars}>")
    assert custom.found_in("a <1|2 cut of 30> b") and not custom.found_in("a <1|2 of 30> b")
    fields = custom.read("a <1|2 cut of 30> b")
    assert fields is not None and (fields.head, fields.tail, fields.original_chars) == (1, 2, 30)
