"""Reading the usage a provider reported in a streamed answer
(``conversation/usage/usage_stream.py``): in the last events of each API's stream,
as the chunks pass (however they are cut), by the SSE rules, in bounded
memory, gzip- or deflate-compressed or not.

The streams are written the way the APIs send them (event sequence as in the
providers' documentation and SDK types)."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from obsmask_core.conversation.usage.provider_usage import ProviderUsage
from obsmask_core.conversation.usage.usage_stream import (
    MAX_EVENT_BYTES,
    SseUsageReader,
    usage_from_sse,
)
from support.usage import (
    ANTHROPIC_JSON,
    ANTHROPIC_STREAM,
    ANTHROPIC_USAGE,
    CHAT_JSON,
    CHAT_STREAM,
    CHAT_USAGE,
    RESPONSES_STREAM,
    STREAM_IDS,
    STREAMS,
    chat_chunk,
    read,
    responses_object,
    sse,
)


@pytest.mark.parametrize(("stream", "expected"), STREAMS, ids=STREAM_IDS)
def test_a_streamed_answer_gives_its_usage(stream, expected):
    assert read([stream]).usage == expected
    assert usage_from_sse(stream) == expected


@pytest.mark.parametrize(("stream", "expected"), STREAMS, ids=STREAM_IDS)
def test_a_stream_fed_byte_by_byte_gives_the_same_usage(stream, expected):
    reader = SseUsageReader()
    for i in range(len(stream)):
        reader.feed(stream[i : i + 1])
    reader.finish()
    assert reader.usage == expected


def test_usage_is_known_before_the_stream_ends():
    """The usage is read when its event ends, not only at finish()."""
    reader = SseUsageReader()
    reader.feed(CHAT_STREAM)
    assert reader.usage == CHAT_USAGE
    reader = SseUsageReader()
    reader.feed(ANTHROPIC_STREAM.split(b"event: content_block_start")[0])
    assert reader.usage == ProviderUsage(
        input_tokens=12, cached_input_tokens=24000, cache_creation_input_tokens=1500,
        output_tokens=1,
    )


def test_chat_stream_without_include_usage_gives_none():
    stream = sse(
        (None, {k: v for k, v in chat_chunk({"content": "hi"}).items() if k != "usage"}),
        (None, chat_chunk({}, finish="stop")),
        (None, "[DONE]"),
    )
    reader = read([stream])
    assert reader.usage is None
    assert reader.problem is None


def test_responses_incomplete_carries_usage():
    stream = sse(("response.incomplete", {
        "type": "response.incomplete", "sequence_number": 3,
        "response": responses_object("incomplete", {"input_tokens": 10,
                                             "input_tokens_details": {"cached_tokens": 0},
                                             "output_tokens": 64,
                                             "output_tokens_details": {"reasoning_tokens": 0},
                                             "total_tokens": 74})}))
    assert usage_from_sse(stream) == ProviderUsage(
        input_tokens=10, cached_input_tokens=0, output_tokens=64
    )


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_every_sse_line_end_is_read(eol):
    stream = sse((None, chat_chunk({}, usage=CHAT_JSON["usage"], choices=False)),
                 (None, "[DONE]"), eol=eol)
    assert usage_from_sse(stream) == CHAT_USAGE


def test_the_sse_rules_for_comments_fields_and_data_lines_are_followed():
    """Comments, multi-line data, no space after the colon, other fields, a BOM."""
    usage_lines = json.dumps(ANTHROPIC_JSON, indent=1).split("\n")
    stream = (
        "\ufeff: a comment first, after the byte order mark\r\n"
        "retry: 3000\n"
        "id: 1\n"
        "event: message\n"
        + "".join(f"data:{line}\n" if i % 2 else f"data: {line}\r\n"
                  for i, line in enumerate(usage_lines))
        + ": keep-alive\n"
        "\n"
        "data\n"
        "\n"
    ).encode()
    assert usage_from_sse(stream) == ANTHROPIC_USAGE


def test_a_byte_order_mark_is_dropped_only_at_the_start():
    """The SSE rules (WHATWG HTML, "Server-sent events") drop one byte order
    mark at the start of the stream, and only there."""
    event = sse((None, chat_chunk({}, usage=CHAT_JSON["usage"], choices=False)))
    assert usage_from_sse(b"\xef\xbb\xbf" + event) == CHAT_USAGE
    assert usage_from_sse(b"\xef\xbb\xbf\n" + event) == CHAT_USAGE
    assert usage_from_sse(b"\n\xef\xbb\xbf" + event) is None


def test_event_without_final_blank_line_is_read_at_finish():
    stream = sse((None, chat_chunk({}, usage=CHAT_JSON["usage"], choices=False))).rstrip(b"\n")
    reader = SseUsageReader()
    reader.feed(stream)
    assert reader.usage is None
    reader.finish()
    assert reader.usage == CHAT_USAGE


def test_invalid_utf8_in_data_does_not_stop_the_reader():
    stream = b'data: {"usage": {"input_tokens": 5}, "text": "\xff\xfe"}\n\n' + ANTHROPIC_STREAM
    assert usage_from_sse(stream) == ANTHROPIC_USAGE


# --- bounded memory ----------------------------------------------------------


def test_oversized_event_is_dropped_and_the_reader_resynchronises():
    cap = 4096
    huge = chat_chunk({"content": "x" * 10_000}, usage={"prompt_tokens": 1, "completion_tokens": 1})
    stream = sse((None, huge)) + CHAT_STREAM
    reader = SseUsageReader(max_event_bytes=cap)
    for i in range(0, len(stream), 100):
        reader.feed(stream[i : i + 100])
        assert reader.buffered_bytes <= cap
    reader.finish()
    assert reader.usage == CHAT_USAGE


def test_oversized_event_alone_gives_none():
    huge = chat_chunk({"content": "x" * 10_000}, usage={"prompt_tokens": 1, "completion_tokens": 1})
    assert read([sse((None, huge))], max_event_bytes=4096).usage is None


def test_event_at_the_cap_is_read():
    stream = sse((None, chat_chunk({}, usage=CHAT_JSON["usage"], choices=False)))
    assert read([stream], max_event_bytes=len(stream)).usage == CHAT_USAGE


def test_long_comments_do_not_count():
    stream = b": " + b"p" * 100_000 + b"\n" + CHAT_STREAM
    reader = SseUsageReader(max_event_bytes=4096)
    reader.feed(stream)
    assert reader.buffered_bytes <= 4096
    reader.finish()
    assert reader.usage == CHAT_USAGE


def test_an_endless_event_stays_under_the_default_cap():
    reader = SseUsageReader()
    chunk = b"data: " + b"z" * 65_536
    for _ in range(40):  # 2.5 MiB without a blank line
        reader.feed(chunk)
        assert reader.buffered_bytes <= MAX_EVENT_BYTES
    reader.feed(b"\n\n" + CHAT_STREAM)
    assert reader.usage == CHAT_USAGE


# --- content encodings -------------------------------------------------------


def _deflate(data: bytes, raw: bool) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize(("stream", "expected"), STREAMS, ids=STREAM_IDS)
@pytest.mark.parametrize("encoding", ["gzip", "GZIP", "x-gzip", "deflate", "raw-deflate"])
def test_a_compressed_stream_is_read_whatever_the_chunking(stream, expected, encoding):
    if encoding == "raw-deflate":
        body, header = _deflate(stream, raw=True), "deflate"
    elif encoding == "deflate":
        body, header = _deflate(stream, raw=False), encoding
    else:
        body, header = gzip.compress(stream), encoding
    assert read([body[i : i + 7] for i in range(0, len(body), 7)], header).usage == expected
    assert read([body[i : i + 1] for i in range(len(body))], header).usage == expected
    assert usage_from_sse(body, header) == expected


def test_gzip_bomb_is_read_in_bounded_steps():
    """A small compressed chunk that expands a lot is still read (and capped)."""
    stream = b"data: " + b"a" * 5_000_000 + b"\n\n" + CHAT_STREAM
    body = gzip.compress(stream)
    reader = SseUsageReader("gzip")
    reader.feed(body)
    assert reader.buffered_bytes <= MAX_EVENT_BYTES
    reader.finish()
    assert reader.usage == CHAT_USAGE


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, br", "weird"])
def test_unread_encodings_give_none(encoding):
    reader = read([b"\x1b\x00\xf8\xa5", CHAT_STREAM], encoding)
    assert reader.usage is None
    assert reader.problem is not None
    assert encoding in reader.problem


@pytest.mark.parametrize("encoding", [None, "", "identity", " Identity "])
def test_identity_encodings_are_read_as_plain_text(encoding):
    assert read([CHAT_STREAM], encoding).usage == CHAT_USAGE


def test_corrupt_gzip_keeps_what_was_read():
    body = gzip.compress(CHAT_STREAM)
    reader = read([body[:-8], b"\x00" * 8 + b"trailing garbage"], "gzip")
    assert reader.usage == CHAT_USAGE
    reader = read([b"\x1f\x8b\x08\x00garbage" * 10], "gzip")
    assert reader.usage is None
    assert reader.problem is not None


# --- every split of the real streams ----------------------------------------


def test_every_two_way_split_of_the_real_streams_reads_like_the_whole():
    """CRLF line ends: this covers cuts between CR and LF and inside characters."""
    for stream, expected in STREAMS:
        body = stream.replace(b"\n", b"\r\n")
        for i in range(len(body) + 1):
            assert read([body[:i], body[i:]]).usage == expected


@pytest.mark.parametrize(("stream", "final_event"), [
    (CHAT_STREAM, b'"usage":{"prompt_tokens"'),
    (RESPONSES_STREAM, b"event: response.completed"),
    (ANTHROPIC_STREAM, b"event: message_delta"),
], ids=["chat", "responses", "anthropic"])
def test_the_usage_is_complete_once_the_event_that_ends_the_report_is_read(stream, final_event):
    """Each API reports its usage last in one known event (Chat: the chunk
    with a usage object; Responses: response.completed; Anthropic:
    message_delta): once that event has been read the reader says the usage
    is final, even if the stream never ends; before it, it does not (an
    Anthropic message_start carries usage too, but not the final one)."""
    start = stream.index(final_event)
    end = stream.index(b"\n\n", start) + 2
    reader = SseUsageReader()
    reader.feed(stream[:start])
    assert not reader.complete
    reader.feed(stream[start : end - 1])
    assert not reader.complete  # the event has not ended yet
    reader.feed(stream[end - 1 : end])
    assert reader.complete
    reader.finish()
    assert reader.usage == read([stream]).usage


def test_a_stream_that_ends_early_is_never_complete():
    reader = SseUsageReader()
    reader.feed(ANTHROPIC_STREAM.split(b"event: message_delta")[0])
    reader.finish()
    assert not reader.complete and reader.usage is not None
