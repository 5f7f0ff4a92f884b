"""Cutting JSON-RPC responses carried by a server-sent events stream
(``mcp/sse_rewrite.py``): event by event, every other line byte for byte,
however the stream is cut into transport chunks, compressed or not."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.mcp.sse_rewrite import SseTruncator, truncate_sse_body
from obsmask_core.mcp.tool_limits import AnswerLimits
from obsmask_core.shared.inflate import can_inflate
from obsmask_core.shared.recall_text import store_id
from obsmask_core.shared.truncation import TRUNCATION_MARK
from support.mcp_messages import DEFAULTS, LONG, expected_cut, numbered, response, text_block
from support.sse import sse_events

SMALL = TruncationLimits(
    max_chars=20, head_chars=5, tail_chars=5, marker_template="[cut {original_chars}]"
)


def run_sse(chunks: list[bytes], limits: TruncationLimits = DEFAULTS,
            encoding: str | None = None) -> tuple[bytes, SseTruncator]:
    """Feed ``chunks`` in order and finish; no call may hand back an empty
    byte string (an empty chunk in the middle of a chunked body ends it)."""
    truncator = SseTruncator(limits, content_encoding=encoding)
    out: list[bytes] = []
    for chunk in chunks:
        pieces = truncator.feed(chunk)
        assert all(isinstance(piece, bytes) and piece for piece in pieces), pieces
        out.extend(pieces)
    pieces = truncator.finish()
    assert all(isinstance(piece, bytes) and piece for piece in pieces), pieces
    out.extend(pieces)
    return b"".join(out), truncator


LONG_SSE = "é" * 3000 + numbered(3000) + "😀" * 50


SSE_RESPONSE = response({"content": [text_block(LONG_SSE)]}, id_=7)


def data_lines(message: object, eol: str = "\n", indent: int | None = None) -> str:
    text = json.dumps(message, ensure_ascii=False, indent=indent)
    return "".join(f"data: {line}{eol}" for line in text.split("\n"))


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_sse_response_event_is_cut_and_other_lines_pass(eol):
    """With \\n, \\r\\n or \\r line ends, a response event is cut and every
    other line passes as it came: comments, priming events (an id and an
    empty data:), retry:, id: and event: lines."""
    before = (f": keep-alive{eol}{eol}"
              f"id: prime-1{eol}data:{eol}{eol}"
              f"retry: 3000{eol}{eol}"
              f"event: message{eol}id: 7{eol}")
    after = f"{eol}: bye{eol}"
    stream = (before + data_lines(SSE_RESPONSE, eol) + after).encode()
    out, truncator = run_sse([stream])
    expected = before + data_lines(response({"content": [text_block(expected_cut(LONG_SSE))]},
                                            id_=7), eol) + after
    assert out == expected.encode()
    [event_cut] = truncator.take_cuts()
    assert event_cut.cuts[0].chars_before == len(LONG_SSE)
    assert truncator.take_cuts() == [] and truncator.problem is None


def test_sse_multi_line_data_is_cut_and_still_parses_when_joined():
    """The data: lines of an event are joined with \\n, as the SSE rules say: a
    response spread over several data: lines (with and without the optional
    space, with an id: line among them) is cut and the joined data still
    parses."""
    text = json.dumps(SSE_RESPONSE, ensure_ascii=False, indent=2).split("\n")
    lines = [f"data:{line}" if i % 2 else f"data: {line}" for i, line in enumerate(text)]
    lines.insert(3, "id: 9")
    stream = ("event: message\n" + "\n".join(lines) + "\n\n").encode()
    out, _ = run_sse([stream])
    [(event_type, data, last_id)] = sse_events(out)
    assert (event_type, last_id) == ("message", "9")
    assert json.loads(data) == response({"content": [text_block(expected_cut(LONG_SSE))]}, id_=7)
    # Still one data line per line of the original JSON, and the id: line kept.
    assert out.count(b"\ndata:") == len(text) and b"\nid: 9\n" in out


def test_sse_each_data_line_keeps_its_own_line_end():
    """A rewritten event keeps each data line's own ending. (Regression: all of
    them used to take the first data line's; a "\\r" put before the blank
    "\\n" line made one "\\r\\n" of the two, and the event never ended.)"""
    json_text = json.dumps(SSE_RESPONSE, ensure_ascii=False)
    stream = ("data:\rid: 4\r\ndata: " + json_text + "\n\nevent: next\ndata: x\n\n").encode()
    for chunks in ([stream], [stream[:6], stream[6:]], [bytes([b]) for b in stream]):
        out, _ = run_sse(chunks)
        cut_json = json.dumps(
            response({"content": [text_block(expected_cut(LONG_SSE))]}, id_=7), ensure_ascii=False
        )
        assert out == ("data: \rid: 4\r\ndata: " + cut_json
                       + "\n\nevent: next\ndata: x\n\n").encode()
        assert [event[0] for event in sse_events(out)] == ["message", "next"]


def test_sse_split_anywhere_gives_the_same_output():
    """An event split across any number of transport chunks, and a UTF-8
    character split across two, come out as from the unsplit stream — every
    2-way split, many 3-way splits around the framing, and one byte at a
    time."""
    small = response({"content": [text_block("é" * 12 + "😀" * 6 + "abcdef")]}, id_="x")
    stream = (b"\xef\xbb\xbf: c\r\n\r\nid: 1\r\ndata:\r\n\r"
              + data_lines(small, "\r\n", indent=1).encode() + b"\r\n"
              + data_lines(small, "\r").encode() + b"\r"
              + b"event: x\ndata: plain \xc3\xa9\n\n")
    whole, _ = run_sse([stream], SMALL)
    assert whole.startswith(b"\xef\xbb\xbf") and whole.count(b"[cut 24]") == 2
    for cut in range(len(stream) + 1):
        assert run_sse([stream[:cut], stream[cut:]], SMALL)[0] == whole, cut
    assert run_sse([stream[i : i + 1] for i in range(len(stream))], SMALL)[0] == whole
    framing = [i for i in range(len(stream) + 1) if stream[i - 1 : i] in (b"\r", b"\n")]
    for a in framing:
        for b in framing:
            low, high = sorted((a, b))
            chunks = [stream[:low], stream[low:high], b"", stream[high:]]
            assert run_sse(chunks, SMALL)[0] == whole, (low, high)


def test_sse_a_utf8_character_split_across_two_chunks_comes_out_whole():
    """A UTF-8 character split across two chunks comes out whole."""
    stream = data_lines(SSE_RESPONSE).encode() + b"\n"
    middle = stream.index("é".encode()) + 1  # between the two bytes of an é
    emoji = stream.index("😀".encode()) + 2
    whole, _ = run_sse([stream])
    assert run_sse([stream[:middle], stream[middle:]])[0] == whole
    assert run_sse([stream[:emoji], stream[emoji:]])[0] == whole
    assert json.loads(sse_events(whole)[0][1])["result"]["content"][0]["text"] == expected_cut(
        LONG_SSE
    )


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "deflate", "raw-deflate"])
def test_sse_a_compressed_stream_goes_out_decoded_and_cut(encoding):
    """A gzip or deflate (zlib or raw) stream from the server goes out decoded
    and cut, whatever the chunking."""
    stream = (b": hello\n\n" + data_lines(SSE_RESPONSE).encode() + b"\n") * 3
    if encoding in ("gzip", "x-gzip"):
        compressed = gzip.compress(stream)
    elif encoding == "deflate":
        compressed = zlib.compress(stream)
    else:
        squeezer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        compressed = squeezer.compress(stream) + squeezer.flush()
    header = "deflate" if encoding == "raw-deflate" else encoding
    plain, _ = run_sse([stream])
    assert plain.count(TRUNCATION_MARK.encode()) == 3
    for size in (1, 7, 1000, len(compressed)):
        chunks = [compressed[i : i + size] for i in range(0, len(compressed), size)]
        out, truncator = run_sse(chunks, encoding=header)
        assert out == plain and truncator.problem is None


def test_sse_a_corrupt_or_unknown_compression_is_reported_not_raised():
    """A stream that cannot be decoded is reported, never raised mid-stream;
    an encoding that cannot be read is refused up front."""
    assert can_inflate(None) and can_inflate("identity") and can_inflate(" GZIP ")
    assert not can_inflate("br") and not can_inflate("zstd")
    with pytest.raises(ValueError):
        SseTruncator(DEFAULTS, content_encoding="br")
    out, truncator = run_sse([b"\x1f\x8b\x08\x00garbage" * 10], encoding="gzip")
    assert out == b"" and truncator.problem and "corrupt" in truncator.problem


def test_sse_feed_never_returns_an_empty_bytes_object():
    """An empty chunk in the middle of a chunked body ends it: feed() returns
    an empty list, never [b""], while it holds a line or an event."""
    truncator = SseTruncator(SMALL)
    assert truncator.feed(b"") == []
    assert truncator.feed(b"\xef") == []  # maybe a byte order mark
    assert truncator.feed(b"\xbb\xbf") == [b"\xef\xbb\xbf"]
    assert truncator.feed(b"data: {") == []  # an incomplete line
    assert truncator.feed(b"\n") == []  # a data line held until the event ends
    assert truncator.feed(b"") == []
    assert truncator.feed(b"\r") == []
    assert truncator.feed(b"\n") == [b"data: {\n\r\n"]
    assert truncator.finish() == []


def test_sse_non_jsonrpc_events_pass_byte_for_byte():
    """Events that are not JSON-RPC responses pass byte for byte: OpenAI chat
    chunks and the like, JSON-RPC requests from the server, broken JSON."""
    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": {"content": LONG}}]}
    request = {"jsonrpc": "2.0", "id": 3, "method": "sampling/createMessage",
               "params": {"messages": [{"content": text_block(LONG)}]}}
    stream = (data_lines(chunk) + "\n" + data_lines(request) + "\n"
              + 'data: {"jsonrpc": "2.0", "id": 1, "result": "' + LONG + '"\n\n'
              + "data: [DONE]\n\n").encode()
    for chunks in ([stream], [stream[i : i + 100] for i in range(0, len(stream), 100)]):
        out, truncator = run_sse(chunks)
        assert out == stream and truncator.take_cuts() == []
    outcome = truncate_sse_body(stream, DEFAULTS)
    assert outcome.body is None and outcome.cuts == []


def test_sse_an_unfinished_event_goes_out_as_it_came():
    """At the end of the stream an event without its blank line goes out
    uncut (a client drops it anyway), and so does a last line with no end."""
    stream = data_lines(SSE_RESPONSE).encode() + b"data: tail-without-end"
    out, truncator = run_sse([stream[:50], stream[50:]])
    assert out == stream and truncator.take_cuts() == []
    out, _ = run_sse([b"\r"])
    assert out == b"\r"


def test_sse_the_whole_body_form_gives_the_same_bytes():
    """truncate_sse_body: the buffered form gives the same bytes and the cuts,
    and None when nothing was cut."""
    stream = (data_lines(SSE_RESPONSE) + "\n").encode()
    outcome = truncate_sse_body(stream, DEFAULTS)
    assert outcome.body == run_sse([stream])[0] and len(outcome.cuts) == 1
    assert outcome.problem is None
    assert truncate_sse_body(outcome.body, DEFAULTS).body is None  # idempotent
    assert truncate_sse_body(b"data: {}\n\n", DEFAULTS).body is None


def test_sse_every_member_of_a_gzip_stream_is_read():
    """A gzip stream may hold several members (RFC 1952 2.2), one per flush:
    every member is read, not only the first."""
    first = b": ping\n\n"
    second = b"data: " + json.dumps(SSE_RESPONSE).encode() + b"\n\n"
    compressed = gzip.compress(first) + gzip.compress(second)
    truncator = SseTruncator(DEFAULTS, "gzip")
    out = b"".join(truncator.feed(compressed) + truncator.finish())
    assert out.startswith(first + b"data: ") and TRUNCATION_MARK.encode() in out
    assert truncator.problem is None


def test_sse_with_recall_each_cut_string_carries_its_store_id_and_original():
    stream = (data_lines(SSE_RESPONSE) + "\n").encode()
    truncator = SseTruncator(DEFAULTS, recall=True)
    out = b"".join(truncator.feed(stream[:100]) + truncator.feed(stream[100:])
                   + truncator.finish())
    [(_, data, _)] = sse_events(out)
    recall_id = store_id(LONG_SSE)
    assert json.loads(data)["result"]["content"][0]["text"] == expected_cut(
        LONG_SSE, recall_id=recall_id)
    [event] = truncator.take_cuts()
    assert [(cut.recall_id, cut.original) for cut in event.cuts] == [(recall_id, LONG_SSE)]


def test_sse_each_response_is_cut_at_the_limit_of_its_tool():
    """On a stream, as in a body, each response gets its own tool's limit."""
    limits = TruncationLimits(max_chars_for=(("fs/read_file", "9000"),))
    per_message = AnswerLimits(limits.tool_limits(), "fs", {"7": "read_file"}.get)
    other = response({"content": [text_block(LONG_SSE)]}, id_=8)
    stream = (data_lines(SSE_RESPONSE) + "\n" + data_lines(other) + "\n").encode()
    out = truncate_sse_body(stream, limits, per_message=per_message).body
    assert out is not None
    first, second = (json.loads(event[1]) for event in sse_events(out))
    assert first == SSE_RESPONSE
    assert second["result"]["content"][0]["text"] == expected_cut(LONG_SSE)


def test_sse_a_tools_list_event_is_handed_to_the_ceiling_reader():
    """The data of an event that may be a tools/list answer (a tools array,
    each tool with its inputSchema) goes to the reader, however short; other
    events do not."""
    listed = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [
        {"name": "read_file", "inputSchema": {"type": "object"},
         "_meta": {"anthropic/maxResultSizeChars": 30000}}]}}
    read: list[bytes] = []
    stream = (": ping\n\n" + data_lines(listed) + "\n" + data_lines(SSE_RESPONSE) + "\n").encode()
    truncator = SseTruncator(DEFAULTS, read_ceilings=read.append)
    truncator.feed(stream)
    truncator.finish()
    assert [json.loads(text) for text in read] == [listed]
