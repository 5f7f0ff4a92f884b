"""Property-based tests of the MCP truncation: on any JSON value the cut keeps
the JSON-RPC structure and touches only the long strings it may cut; any
split of a server-sent events stream into transport chunks (compressed or
not) gives the output of the unsplit stream; truncating twice is
truncating once; and whatever the limits per server and tool, each response
is cut at its own."""

from __future__ import annotations

import fnmatch
import gzip
import itertools
import json
import re
import zlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.mcp.cut import truncate_jsonrpc_text
from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.mcp.protected_keys import BINARY_CONTENT_TYPES, PROTECTED_KEYS
from obsmask_core.mcp.sse_rewrite import SseTruncator, truncate_sse_body
from obsmask_core.mcp.tool_limits import AnswerLimits
from obsmask_core.shared.recall_text import store_id
from obsmask_core.shared.truncation import DEFAULT_MARKER_TEMPLATE
from support.mcp_messages import marker_text
from support.sse import sse_events

TEMPLATES = [
    DEFAULT_MARKER_TEMPLATE,
    "<cut {original_chars}>",
    "<{head}+{tail} of {original_chars} kept>",
    "<x>",
]


@st.composite
def limits_strategy(draw: st.DrawFn) -> TruncationLimits:
    """Small limits, so that long strings are common."""
    max_chars = draw(st.integers(1, 30))
    head = draw(st.integers(0, max_chars))
    tail = draw(st.integers(0, max_chars - head))
    return TruncationLimits(max_chars=max_chars, head_chars=head, tail_chars=tail,
                            marker_template=draw(st.sampled_from(TEMPLATES)))


# "<" and "[" never occur in generated text, so no generated string carries a
# marker before it is cut (idempotence has its own property).
characters = st.characters(exclude_characters="<[", codec="utf-8")
strings = st.one_of(
    st.text(characters, max_size=12),
    st.text(st.sampled_from('aé😀"\\\n\t\u2028/'), max_size=120),
    st.text(characters, min_size=20, max_size=120),
)
keys = st.sampled_from(
    ["text", "data", "type", "content", "id", "result", "error", "jsonrpc", "message",
     "isError", "é", 'q"k', "a\\b", *sorted(PROTECTED_KEYS)]
) | st.text(characters, max_size=4)
scalars = st.none() | st.booleans() | st.integers() | st.floats(
    allow_nan=False, allow_infinity=False
) | strings


def blocks(children: st.SearchStrategy[object]) -> st.SearchStrategy[dict[str, object]]:
    """Content blocks, their "type" before or after their "data"."""
    block = st.fixed_dictionaries(
        {"type": st.sampled_from(["image", "audio", "text", "resource"]), "data": strings},
        optional={"mimeType": strings, "text": strings, "_meta": children},
    )
    return block.flatmap(lambda d: st.permutations(list(d.items())).map(dict))


json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(keys, children, max_size=4)
    | blocks(children),
    max_leaves=16,
)


@st.composite
def bodies(draw: st.DrawFn) -> tuple[object, object]:
    """(message or batch, what it is expected to be cut to) — the expectation
    is computed by the caller; here: the JSON value and where it sits."""
    value = draw(json_values)
    id_ = draw(st.integers() | strings | st.none())
    if draw(st.booleans()):
        members = [("jsonrpc", "2.0"), ("id", id_), ("result", value)]
    else:
        error = [("code", draw(st.integers())), ("message", draw(strings)), ("data", value)]
        members = [("jsonrpc", "2.0"), ("id", id_),
                   ("error", dict(draw(st.permutations(error))))]
    message = dict(draw(st.permutations(members)))
    if not draw(st.integers(0, 3)):
        others = [{"jsonrpc": "2.0", "method": "notifications/x", "params": {"v": value}},
                  {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": [value]}]
        return draw(st.permutations([message, *others])), value
    return message, value


def reference_cut(text: str, limits: TruncationLimits) -> str:
    """The rule, written out: head + marker + tail for a string longer than
    max_chars, unless that would not be shorter."""
    if len(text) <= limits.max_chars:
        return text
    marker = marker_text(limits.marker_template, len(text), limits.head_chars,
                         limits.tail_chars)
    if limits.head_chars + len(marker) + limits.tail_chars >= len(text):
        return text
    tail = text[len(text) - limits.tail_chars :] if limits.tail_chars else ""
    return text[: limits.head_chars] + marker + tail


def reference(value: object, limits: TruncationLimits) -> object:
    """Every string cut, except under PROTECTED_KEYS and the data (and the
    type, for a max_chars below 5) of an image or audio block."""
    if isinstance(value, str):
        return reference_cut(value, limits)
    if isinstance(value, list):
        return [reference(item, limits) for item in value]
    if isinstance(value, dict):
        binary = isinstance(value.get("type"), str) and value["type"] in BINARY_CONTENT_TYPES
        return {
            key: item if key in PROTECTED_KEYS or (binary and key in ("type", "data")
                                                   and isinstance(item, str))
            else reference(item, limits)
            for key, item in value.items()
        }
    return value


def reference_message(message: object, limits: TruncationLimits) -> object:
    if isinstance(message, list):
        return [reference_message(item, limits) for item in message]
    assert isinstance(message, dict)
    if "result" in message:
        return {**message, "result": reference(message["result"], limits)}
    if "error" in message:
        error = message["error"]
        return {**message, "error": {**error, "data": reference(error["data"], limits)}}
    return message  # requests and notifications are never cut


def shape(value: object) -> object:
    """Keys, list lengths and types, without the strings' contents."""
    if isinstance(value, dict):
        return ("dict", tuple((key, shape(item)) for key, item in value.items()))
    if isinstance(value, list):
        return ("list", tuple(shape(item) for item in value))
    return type(value).__name__


def count_cuts(before: object, after: object) -> int:
    if isinstance(before, dict) and isinstance(after, dict):
        return sum(count_cuts(before[key], after[key]) for key in before)
    if isinstance(before, list) and isinstance(after, list):
        return sum(count_cuts(a, b) for a, b in zip(before, after, strict=True))
    return int(before != after)


FORMATS = st.tuples(
    st.sampled_from([None, 0, 2]),
    st.sampled_from([None, (",", ":"), (" , ", " : "), (",\t", ":\r\n")]),
    st.booleans(),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies(), limits=limits_strategy(), json_format=FORMATS)
def test_any_json_value_keeps_its_structure(body, limits, json_format):
    """Each string longer than max_chars inside ``result`` and inside
    ``error.data`` becomes head + marker + tail, protected keys and
    image/audio data excepted; the JSON-RPC structure is not broken (same
    keys, same list lengths, same types); and every byte outside the cut
    strings is the input's."""
    message, _ = body
    indent, separators, ensure_ascii = json_format
    text = json.dumps(message, indent=indent, separators=separators, ensure_ascii=ensure_ascii)
    outcome = truncate_jsonrpc_text(text, limits)
    assert outcome.scan.problem is None
    expected = reference_message(message, limits)
    cuts = count_cuts(message, expected)
    assert len(outcome.cuts) == cuts
    if not cuts:
        assert outcome.text is None
        return
    assert outcome.text is not None
    after = json.loads(outcome.text)
    assert shape(after) == shape(message)
    assert after == expected
    if not ensure_ascii:
        assert outcome.text == json.dumps(
            expected, indent=indent, separators=separators, ensure_ascii=False
        )
    # Outside the spans of the strings that were looked at, byte for byte.
    out, delta, previous = outcome.text, 0, 0
    decoder = json.JSONDecoder()
    for start, end, _ in outcome.scan.spans:
        assert out[previous + delta : start + delta] == text[previous:start]
        value, new_end = decoder.raw_decode(out, start + delta)
        assert value == reference_cut(json.loads(text[start:end]), limits)
        delta, previous = new_end - end, end
    assert out[previous + delta :] == text[previous:]


# Server-sent events --------------------------------------------------------------

EOLS = st.sampled_from(["\n", "\r\n", "\r"])
OTHER_LINES = st.sampled_from(
    [": keep-alive", ":", "id: 7", "id:", "event: message", "event:", "retry: 3000",
     "unknown: field", "data", "data:"]
)
LINE_TEXT = st.text(st.characters(exclude_characters="\r\n", codec="utf-8"), max_size=30)
payload_alphabet = st.sampled_from("aé😀\"\\\n€")
payload_strings = st.text(payload_alphabet, max_size=30) | st.text(
    payload_alphabet, min_size=20, max_size=150
)


@st.composite
def jsonrpc_payloads(draw: st.DrawFn) -> object:
    text = draw(payload_strings)
    kind = draw(st.sampled_from(["result", "result", "error", "request", "batch"]))
    if kind == "result":
        return {"jsonrpc": "2.0", "id": draw(st.integers(0, 9)),
                "result": {"content": [{"type": "text", "text": text}],
                           "structuredContent": {"rows": [text, 1, None]}}}
    if kind == "error":
        return {"jsonrpc": "2.0", "id": None,
                "error": {"code": -1, "message": text, "data": {"trace": text}}}
    request = {"jsonrpc": "2.0", "id": 3, "method": "sampling/createMessage",
               "params": {"text": text}}
    if kind == "request":
        return request
    return [request, {"jsonrpc": "2.0", "id": 4, "result": text}]


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    """Events with mixed line ends, comments, id/event/retry lines, priming
    events, multi-line data, JSON-RPC payloads with long non-ASCII strings,
    and other data (OpenAI-style chunks, plain text)."""
    pieces: list[str] = []
    if not draw(st.integers(0, 9)):
        pieces.append("\ufeff")
    count = draw(st.integers(1, 5))
    for number in range(count):
        lines = draw(st.lists(OTHER_LINES, max_size=2))
        kind = draw(st.sampled_from(["jsonrpc", "jsonrpc", "jsonrpc", "openai", "text", "none"]))
        if kind == "jsonrpc":
            data = json.dumps(draw(jsonrpc_payloads()), ensure_ascii=draw(st.booleans()),
                              indent=draw(st.sampled_from([None, 1])))
        elif kind == "openai":
            data = json.dumps({"object": "chat.completion.chunk",
                               "choices": [{"delta": {"content": draw(payload_strings)}}]})
        elif kind == "text":
            data = "\n".join(draw(st.lists(LINE_TEXT, min_size=1, max_size=3)))
        else:
            data = None
        if data is not None:
            for line in data.split("\n"):
                lines.append(draw(st.sampled_from(["data: ", "data:"])) + line)
                if not draw(st.integers(0, 5)):
                    lines.append(draw(OTHER_LINES))
        pieces.extend(line + draw(EOLS) for line in lines)
        if number < count - 1 or draw(st.booleans()):
            pieces.append(draw(EOLS))
    if draw(st.booleans()):
        pieces.append(draw(LINE_TEXT))  # an unended last line
    return "".join(pieces).encode("utf-8")


def special_positions(data: bytes) -> list[int]:
    """Just after each CR, and inside each multi-byte UTF-8 character."""
    return [i for i in range(1, len(data)) if data[i - 1] == 0x0D or 0x80 <= data[i] < 0xC0]


@st.composite
def splits(draw: st.DrawFn, data: bytes) -> list[bytes]:
    positions = st.integers(0, len(data))
    special = special_positions(data)
    if special:
        positions = positions | st.sampled_from(special)
    cuts = sorted(draw(st.lists(positions, max_size=12)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def run_sse(chunks: list[bytes], limits: TruncationLimits, encoding: str | None = None) -> bytes:
    truncator = SseTruncator(limits, content_encoding=encoding)
    out: list[bytes] = []
    for chunk in [*chunks, None]:
        pieces = truncator.feed(chunk) if chunk is not None else truncator.finish()
        # An empty chunk in the middle of a chunked body would end it.
        assert all(isinstance(piece, bytes) and piece for piece in pieces)
        out.extend(pieces)
    assert truncator.problem is None
    return b"".join(out)


SSE_LIMITS = st.sampled_from([
    TruncationLimits(max_chars=20, head_chars=5, tail_chars=5,
                     marker_template="<cut {original_chars}>"),
    TruncationLimits(max_chars=20, head_chars=10, tail_chars=10,
                     marker_template=DEFAULT_MARKER_TEMPLATE),
    TruncationLimits(max_chars=1, head_chars=0, tail_chars=0, marker_template="<x>"),
])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), stream=sse_streams(), limits=SSE_LIMITS)
def test_any_split_of_an_sse_stream_gives_the_unsplit_output(data, stream, limits):
    """An event split across any number of transport chunks, and a UTF-8
    character split across two, come out as from the unsplit stream; and the
    events a client reads are the events sent, with each JSON-RPC response's
    data cut as a JSON body would be (multi-line data joined per the SSE
    rules)."""
    whole = run_sse([stream], limits)
    chunks = data.draw(splits(stream))
    assert run_sse(chunks, limits) == whole
    before, after = sse_events(stream), sse_events(whole)
    assert len(after) == len(before)
    for (type_in, data_in, id_in), (type_out, data_out, id_out) in zip(
        before, after, strict=True
    ):
        assert (type_out, id_out) == (type_in, id_in)
        cut = truncate_jsonrpc_text(data_in, limits).text
        assert data_out == (data_in if cut is None else cut)
    if whole == stream:
        return
    # Only data lines changed: every other line is still there, in order.
    def other_lines(stream: bytes) -> list[bytes]:
        lines = re.split(rb"\r\n|\r|\n", stream.removeprefix(b"\xef\xbb\xbf"))
        return [line for line in lines if not line.startswith(b"data")]

    assert other_lines(whole) == other_lines(stream)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), stream=sse_streams(), limits=SSE_LIMITS,
       encoding=st.sampled_from(["gzip", "deflate"]))
def test_any_split_of_a_compressed_sse_stream_gives_the_plain_output(
    data, stream, limits, encoding
):
    """A gzip or deflate stream, split anywhere, decodes and cuts to the output
    of the plain unsplit stream."""
    compressed = gzip.compress(stream) if encoding == "gzip" else zlib.compress(stream)
    chunks = data.draw(splits(compressed))
    assert run_sse(chunks, limits, encoding) == run_sse([stream], limits)


# Idempotence ---------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies(), limits=limits_strategy(), indent=st.sampled_from([None, 1]))
def test_truncating_twice_is_truncating_once(body, limits, indent):
    """A string that already carries the marker is not cut again, so a second
    pass over the output changes nothing."""
    message, _ = body
    once = truncate_jsonrpc_text(json.dumps(message, indent=indent), limits)
    if once.text is None:
        return
    twice = truncate_jsonrpc_text(once.text, limits)
    assert twice.scan.problem is None
    assert twice.text is None and twice.cuts == []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=sse_streams(), limits=SSE_LIMITS)
def test_truncating_an_sse_stream_twice_is_truncating_it_once(stream, limits):
    """Idempotence of the stream form: a stream already cut is not cut again."""
    once = truncate_sse_body(stream, limits)
    if once.body is None:
        return
    assert truncate_sse_body(once.body, limits).body is None


# Limits per server and tool --------------------------------------------------------

SERVERS = ["fs", "db"]
TOOLS = ["read_file", "read_dir", "search", "write"]
rules_strategy = st.lists(st.tuples(
    st.sampled_from(["fs", "db", "*", "f?", "[df]*"]),
    st.sampled_from(["read_*", "search", "*", "r*", "[rs]*", "write"]),
    st.integers(0, 40),
), max_size=4)
rule_strings = st.text("abé😀\n", max_size=12) | st.text("abé😀\n", min_size=20, max_size=120)


def chosen_limit(rules: list[tuple[str, str, int]], default: TruncationLimits, server: str,
                 tool: str | None) -> tuple[int, int, int]:
    """The rule, written out: the first rule whose globs match the server
    and the tool (no tool: the empty name), else max_chars; head and tail in
    the default's proportions."""
    max_chars = default.max_chars
    for server_glob, tool_glob, number in rules:
        if fnmatch.fnmatchcase(server, server_glob) and fnmatch.fnmatchcase(tool or "",
                                                                           tool_glob):
            max_chars = number
            break
    return (max_chars, max_chars * default.head_chars // default.max_chars,
            max_chars * default.tail_chars // default.max_chars)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(limits=limits_strategy(), rules=rules_strategy, server=st.sampled_from(SERVERS),
       calls=st.lists(st.tuples(st.sampled_from([None, *TOOLS]),
                                st.lists(rule_strings, max_size=3)),
                      min_size=1, max_size=4),
       recall=st.booleans())
def test_with_any_rules_a_string_is_cut_iff_longer_than_its_messages_limit(
    limits, rules, server, calls, recall
):
    """Whatever the max_chars_for rules, each response's strings are cut
    exactly when longer than the limit chosen for that response's server and
    tool (0: never), and a cut string keeps a prefix and a suffix of the
    original around its marker (with its recall id when recall is on)."""
    limits = TruncationLimits(max_chars=limits.max_chars, head_chars=limits.head_chars,
                              tail_chars=limits.tail_chars,
                              marker_template=limits.marker_template,
                              max_chars_for=tuple((f"{s}/{t}", str(n)) for s, t, n in rules))
    tools = {str(index): tool for index, (tool, _) in enumerate(calls) if tool is not None}
    per_message = AnswerLimits(limits.tool_limits(), server, tools.get)
    batch = [{"jsonrpc": "2.0", "id": index, "result": strings}
             for index, (_, strings) in enumerate(calls)]
    outcome = truncate_jsonrpc_text(json.dumps(batch), limits, per_message=per_message,
                                    recall=recall)
    after = json.loads(outcome.text) if outcome.text is not None else batch
    for (tool, strings), message in zip(calls, after, strict=True):
        max_chars, head, tail = chosen_limit(rules, limits, server, tool)
        for original, out in zip(strings, message["result"], strict=True):
            if not max_chars or len(original) <= max_chars:
                assert out == original
                continue
            marker = marker_text(limits.marker_template, len(original), head, tail,
                                 store_id(original) if recall else None)
            if head + len(marker) + tail >= len(original):
                assert out == original  # cutting would not shorten it
                continue
            assert out.startswith(original[:head]) and out.endswith(
                original[len(original) - tail :] if tail else "")
            assert out == original[:head] + marker + (original[len(original) - tail :]
                                                      if tail else "")
    assert len(outcome.cuts) == sum(
        a != b for (_, strings), message in zip(calls, after, strict=True)
        for a, b in zip(strings, message["result"], strict=True))
