"""A changed body is set back compressed the way it came: what the upstream
decodes is exactly the new body, the headers end as mitmproxy's own setter
leaves them, and gzip, deflate and brotli are written at a proxy's level,
not at the library defaults made for files."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from mitmproxy import http

from obsmask_core.mitm.body_encoding import FAST_ENCODERS, encoded

DECODERS = {
    "gzip": gzip.decompress,
    "deflate": zlib.decompress,
    "br": brotli.decompress,
    "zstd": lambda b: zstandard.ZstdDecompressor().decompress(b),
}
BODY = b'{"messages": [' + b", ".join(b'{"role": "tool", "content": "line %d"}' % n
                                       for n in range(2000)) + b"]}"


def set_body(message: http.Message, body: bytes) -> None:
    encoded(message, body).apply_to(message)


def request(encoding: str | None, **headers: str) -> http.Request:
    if encoding is not None:
        headers["content-encoding"] = encoding
    return http.Request.make("POST", "http://127.0.0.1/v1/chat/completions", b"", headers)


@pytest.mark.parametrize("encoding", sorted(DECODERS))
def test_the_upstream_decodes_exactly_the_new_body(encoding):
    message = request(encoding)
    set_body(message, BODY)
    assert message.raw_content is not None
    assert DECODERS[encoding](message.raw_content) == BODY
    assert message.get_content() == BODY
    assert message.headers["content-encoding"] == encoding
    assert message.headers["content-length"] == str(len(message.raw_content))


@pytest.mark.parametrize("encoding", sorted(FAST_ENCODERS))
def test_the_same_body_always_compresses_to_the_same_bytes(encoding):
    first, second = request(encoding), request(encoding)
    set_body(first, BODY)
    set_body(second, BODY)
    assert first.raw_content == second.raw_content


def test_gzip_is_written_by_the_fastest_compressor():
    """The gzip header's XFL byte says which compressor wrote the body: 4 is
    the fastest (levels 1 and 2), 2 the slowest (level 9, the library's
    default and mitmproxy 11's)."""
    ours = request("gzip")
    set_body(ours, BODY)
    assert ours.raw_content is not None
    assert ours.raw_content[8] == 4
    assert gzip.compress(BODY, compresslevel=9, mtime=0)[8] == 2


def test_a_brotli_body_is_not_compressed_at_the_files_quality():
    """Quality 11 (brotli's default) takes a second on a few MB; the proxy
    writes a lower quality, which gives other bytes."""
    ours = request("br")
    set_body(ours, BODY)
    assert ours.raw_content != brotli.compress(BODY)
    assert ours.raw_content == brotli.compress(BODY, quality=4)


def test_with_transfer_encoding_no_content_length_is_added():
    message = request("gzip", **{"transfer-encoding": "chunked"})
    set_body(message, BODY)
    assert "content-length" not in message.headers
    assert gzip.decompress(message.raw_content or b"") == BODY


@pytest.mark.parametrize("encoding", [None, "identity", "zstd", "no-such-coding"])
def test_other_encodings_end_as_mitmproxys_setter_leaves_them(encoding):
    ours, mitmproxys = request(encoding), request(encoding)
    set_body(ours, BODY)
    mitmproxys.content = BODY
    assert ours.raw_content == mitmproxys.raw_content
    assert ours.headers.fields == mitmproxys.headers.fields


@settings(max_examples=60, deadline=None)
@given(body=st.binary(max_size=4000), encoding=st.sampled_from(sorted(FAST_ENCODERS)),
       upper=st.booleans())
def test_any_body_comes_back_from_any_encoding(body, encoding, upper):
    """Whatever the body and however the header spells the encoding's case."""
    message = request(encoding.upper() if upper else encoding)
    set_body(message, body)
    assert message.get_content() == body
    assert DECODERS[encoding](message.raw_content or b"") == body


def test_encoding_a_body_leaves_the_message_as_it_was():
    """The flow is changed only once the new body is ready: a message whose
    encoding cannot be written keeps its header and its body until then."""
    message = request("no-such-coding")
    message.raw_content = b"the client's bytes"
    before = (message.raw_content, message.headers.fields)
    new = encoded(message, BODY)
    assert (message.raw_content, message.headers.fields) == before
    assert "content-encoding" not in new.headers and new.raw == BODY
