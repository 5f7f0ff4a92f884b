"""Property-based tests of the streamed usage reader
(``conversation/usage/usage_stream.py``): any stream of events, split into
chunks anywhere (compressed or not), reads like the whole stream; memory
stays under the cap; and no input makes it raise."""

from __future__ import annotations

import gzip
import json
import zlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.usage.provider_usage import ProviderUsage, usage_from_json
from obsmask_core.conversation.usage.usage_stream import SseUsageReader, usage_from_sse
from support.usage import read


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    piece=st.sampled_from([b"x", b"data: x\n", b"data\r", b"\xe2\x82", b"data: {\"usage\"", b":c"]),
    sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=40),
)
def test_endless_event_stays_under_the_cap(piece, sizes):
    cap = 2048
    reader = SseUsageReader(max_event_bytes=cap)
    reader.feed(b"data: ")
    for size in sizes:
        reader.feed(piece * size)
        assert reader.buffered_bytes <= cap
    reader.finish()
    assert reader.buffered_bytes == 0


safe_text = st.text(st.characters(codec="utf-8"), max_size=20)


counts = st.one_of(st.none(), st.integers(0, 10**7))


@st.composite
def usage_objects(draw: st.DrawFn) -> tuple[dict[str, object], ProviderUsage]:
    """A usage object of one of the formats, with the usage it should read as."""
    inp, cached, created, out = draw(counts), draw(counts), draw(counts), draw(counts)
    kind = draw(st.sampled_from(["chat", "responses", "anthropic"]))
    obj: dict[str, object]
    if kind == "chat":
        obj = {"prompt_tokens": inp, "completion_tokens": out,
               "prompt_tokens_details": {"cached_tokens": cached}}
        created = None
    elif kind == "responses":
        obj = {"input_tokens": inp, "output_tokens": out,
               "input_tokens_details": {"cached_tokens": cached}}
        created = None
    else:
        obj = {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": cached,
               "cache_creation_input_tokens": created}
    return obj, ProviderUsage(inp, cached, created, out)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, ProviderUsage | None]:
    """A stream of events, some carrying usage, with mixed line ends and
    non-ASCII text, and the usage it should read as."""
    expected: ProviderUsage | None = None
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
        if draw(st.booleans()):
            parts.append(f": {draw(safe_text).replace(chr(13), '').replace(chr(10), '')}{eol}")
        if draw(st.booleans()):
            parts.append(f"event: {draw(st.sampled_from(['message_delta', 'x', 'ping']))}{eol}")
        if draw(st.integers(0, 4)) == 0:
            data_lines = ["[DONE]"]
        else:
            obj: dict[str, object] = {"type": draw(safe_text), "text": draw(safe_text)}
            if draw(st.booleans()):
                usage_obj, usage = draw(usage_objects())
                where = draw(st.sampled_from(["top", "message", "response"]))
                if where == "top":
                    obj["usage"] = usage_obj
                else:
                    obj[where] = {"usage": usage_obj, "id": draw(safe_text)}
                if usage.as_metadata():
                    expected = usage if expected is None else expected.updated_by(usage)
            indent = draw(st.sampled_from([None, 1]))
            data_lines = json.dumps(obj, ensure_ascii=False, indent=indent).split("\n")
        for line in data_lines:
            parts.append(f"data:{draw(st.sampled_from(['', ' ']))}{line}{eol}")
        parts.append(eol)
    return "".join(parts).encode(), expected


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams(), cuts=st.lists(st.integers(0, 2000), max_size=30))
def test_any_split_reads_like_the_whole(stream, cuts):
    body, expected = stream
    whole = read([body])
    assert whole.usage == expected
    assert read(_split(body, cuts)).usage == expected


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams())
def test_byte_by_byte_reads_like_the_whole(stream):
    """Every boundary at once: inside CRLF, inside multi-byte characters."""
    body, expected = stream
    assert read([body[i : i + 1] for i in range(len(body))]).usage == expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams(), cuts=st.lists(st.integers(0, 2000), max_size=30),
       encoding=st.sampled_from(["gzip", "deflate"]))
def test_any_split_of_a_compressed_stream_reads_like_the_whole(stream, cuts, encoding):
    body, expected = stream
    encoded = gzip.compress(body) if encoding == "gzip" else zlib.compress(body)
    assert read(_split(encoded, cuts), encoding).usage == expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams(), cuts=st.lists(st.integers(0, 2000), max_size=10),
       cap=st.integers(1, 400))
def test_the_cap_does_not_depend_on_the_split(stream, cuts, cap):
    body, _ = stream
    whole = read([body], max_event_bytes=cap)
    assert read(_split(body, cuts), max_event_bytes=cap).usage == whole.usage


garbage = st.one_of(
    st.binary(max_size=300),
    st.lists(
        st.sampled_from([b"data: ", b"data:", b"\n", b"\r", b"\r\n", b":", b"{", b"}", b"[",
                         b'"usage"', b": ", b'{"input_tokens": 1}', b"\xe2\x82\xac", b"\xff",
                         b"event: x", b'{"usage": {"prompt_tokens": 3}}', b"[DONE]",
                         b"\x1f\x8b\x08", b"\x78\x9c"]),
        max_size=60,
    ).map(b"".join),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=garbage, cuts=st.lists(st.integers(0, 400), max_size=10),
       encoding=st.sampled_from([None, "gzip", "deflate", "br"]), cap=st.integers(1, 200))
def test_garbage_never_raises(body, cuts, encoding, cap):
    reader = read(_split(body, cuts), encoding, max_event_bytes=cap)
    assert reader.usage is None or isinstance(reader.usage, ProviderUsage)
    assert reader.buffered_bytes <= cap
    usage_from_json(body)
    usage_from_sse(body, encoding)
