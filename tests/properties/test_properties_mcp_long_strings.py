"""Property-based tests of the JSON-RPC scan's quick paths
(``mcp/jsonrpc_scan.py``, ``long_strings.py``, ``jsonrpc_check.py``): a
string read at C speed (the json module's string reader, or str.find and
orjson) gives the scan the regular expression alone gives, valid text or
not: the same messages, spans and problem, and the value json.loads reads
(here every string is read the fast way, a long string being one of more
than 0 characters, against a scan that reads none so); and
reads_as_jsonrpc, which answers most bodies with orjson, says what the
scan says, members written twice included."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.mcp import jsonrpc_scan
from obsmask_core.mcp.json_tokens import TOKEN
from obsmask_core.mcp.jsonrpc_check import reads_as_jsonrpc
from obsmask_core.mcp.jsonrpc_message import JsonRpcScan
from obsmask_core.mcp.jsonrpc_scan import scan_jsonrpc
from obsmask_core.mcp.long_strings import token_or_long_string

EVERY_STRING_LONG = token_or_long_string(0)

# Quotes, backslashes, line ends, non-ASCII of every width, and a lone
# surrogate, which JSON allows escaped and orjson refuses.
characters = st.sampled_from(['a', 'é', '日', '😀', '"', '\\', '\n', '\t', '/', '\ud800',
                              '\udc00', '\x7f', ' '])
strings = st.text(characters, max_size=40) | st.text(st.characters(codec="utf-8"), max_size=8)
keys = st.sampled_from(["text", "data", "type", "content", "name", "uri", "_meta", "é",
                        'q"k']) | strings
values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | strings,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
envelopes = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0"]),
     "id": st.integers(0, 9) | strings},
    optional={"result": values, "error": values, "method": strings, "params": values},
)
bodies = envelopes | st.lists(envelopes, min_size=1, max_size=3)
# What may break a text: a quote, a backslash, a raw control character, an
# escape JSON does not have, a brace.
breaks = st.sampled_from(['"', "\\", "\x01", "\\x", "\\u12", "}", ""])


@st.composite
def texts(draw: st.DrawFn) -> str:
    """A JSON-RPC text as servers write it (escaped to ASCII or not,
    compact or indented), sometimes broken at one place or cut short."""
    text = json.dumps(draw(bodies), ensure_ascii=draw(st.booleans()),
                      indent=draw(st.sampled_from([None, 1])))
    how = draw(st.sampled_from(["whole", "whole", "broken", "cut"]))
    if how == "broken":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(breaks) + text[at:]
    elif how == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    return text


@contextmanager
def reading_with(pattern: object) -> Iterator[None]:
    with mock.patch.object(jsonrpc_scan, "_TOKEN_OR_LONG", pattern):
        yield


def scanned(text: str, max_chars: int | None, pattern: object) -> JsonRpcScan:
    with reading_with(pattern):
        return scan_jsonrpc(text, max_chars)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts(), max_chars=st.none() | st.integers(0, 30))
def test_reading_strings_at_c_speed_gives_the_scan_of_the_regular_expression(text, max_chars):
    fast = scanned(text, max_chars, EVERY_STRING_LONG)
    slow = scanned(text, max_chars, TOKEN)
    assert (fast.problem, fast.batch, fast.messages, fast.spans) == (
        slow.problem, slow.batch, slow.messages, slow.spans)
    for start, end, _message in fast.spans:
        if start in fast.values:
            assert fast.values[start] == json.loads(text[start:end])


@settings(max_examples=200, deadline=None)
@given(value=strings, ensure_ascii=st.booleans(), pad=st.integers(600, 3000))
def test_a_long_string_read_at_c_speed_has_the_value_json_reads(value, ensure_ascii, pad):
    """Past LONG_STRING_CHARS, with the shipped pattern: the value of the
    span is the value json.loads reads, wherever its quotes and escapes."""
    text = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"text": value + "x" * pad}},
                      ensure_ascii=ensure_ascii)
    scan = scan_jsonrpc(text, 100)
    assert scan.problem is None and len(scan.spans) == 1
    start, end, _ = scan.spans[0]
    assert scan.values[start] == json.loads(text[start:end])


# Members of a message, written by hand so that one may come twice, with
# values a scan and orjson might read differently (an escaped "2.0", a
# container id, a method that is no string).
members = st.sampled_from([
    '"jsonrpc": "2.0"', '"jsonrpc": "2\\u002e0"', '"jsonrpc": "1.0"', '"jsonrpc": 2',
    '"id": 1', '"id": "a"', '"id": null', '"id": {}', '"id": [1]', '"i\\u0064": 1',
    '"result": {}', '"result": "x"', '"error": {"code": 1, "message": "m"}',
    '"method": "ping"', '"method": 5', '"method": []', '"params": {}', '"other": true',
])


@st.composite
def envelope_texts(draw: st.DrawFn) -> str:
    def message() -> str:
        return "{" + ", ".join(draw(st.lists(members, max_size=6))) + "}"

    if draw(st.booleans()):
        return message()
    return "[" + ", ".join(message() for _ in range(draw(st.integers(0, 3)))) + "]"


@settings(max_examples=600, deadline=None)
@given(text=envelope_texts() | texts())
def test_reads_as_jsonrpc_says_what_the_scan_says(text):
    body = text.encode("utf-8", "surrogatepass")
    try:
        expected = scan_jsonrpc(body.decode("utf-8")).problem is None
    except UnicodeDecodeError:
        expected = False
    assert reads_as_jsonrpc(body) == expected
