"""A changed body set back on its request or answer, compressed again as it
came, at a level a proxy can afford.

mitmproxy's own ``message.content = ...`` compresses at the library
defaults, which are made for files, not for a proxy: gzip at level 9 and
brotli at quality 11 take many times as long as gzip at level 1 and brotli
at quality 4 (docs/benchmarks.md), all of it while the request waits. So
gzip and deflate are written at level 1 (nginx's default for the same
reason) and brotli at quality 4; zstd's default level is already fast and
stays mitmproxy's. mitmproxy 12 made the same change to its own encoders
(gzip 1, brotli 0); mitmproxy 11, the newest on Python 3.11, has not, and
brotli's quality 0 gives up most of its ratio (4 keeps it, at gzip 1's
speed). Any other encoding is written by mitmproxy's encoder, as its setter
would.

A masked body is a fraction of the original, so the few percent a faster
level gives away in size are more than won back.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import brotli  # type: ignore[import-untyped]  # mitmproxy's dependency, untyped
from mitmproxy import http
from mitmproxy.net import encoding

GZIP_LEVEL = 1
DEFLATE_LEVEL = 1
BROTLI_QUALITY = 4


def _gzip(body: bytes) -> bytes:
    # wbits 31: a gzip header and trailer; zlib writes mtime 0, so the same
    # body always gives the same bytes (as mitmproxy's encoder does).
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    return compressor.compress(body) + compressor.flush()


def _deflate(body: bytes) -> bytes:
    # With the zlib header and checksum, like mitmproxy's encoder.
    return zlib.compress(body, DEFLATE_LEVEL)


def _brotli(body: bytes) -> bytes:
    compressed: bytes = brotli.compress(body, quality=BROTLI_QUALITY)
    return compressed


FAST_ENCODERS: Mapping[str, Callable[[bytes], bytes]] = MappingProxyType({
    "gzip": _gzip,
    "deflate": _deflate,
    "br": _brotli,
})


@dataclass(frozen=True)
class EncodedBody:
    """A changed body as it goes on the wire (``raw``), and the headers that
    go with it."""

    raw: bytes
    headers: http.Headers

    def apply_to(self, message: http.Message) -> None:
        message.raw_content = self.raw
        message.headers = self.headers


def encoded(message: http.Message, body: bytes) -> EncodedBody:
    """What ``message.content = body`` would leave as the raw body and the
    headers, with gzip, deflate and brotli compressed at a proxy's level;
    ``message`` is not touched (a copy of the whole message, which this
    replaces, cost more than the rest of a small rewrite's report)."""
    headers = message.headers.copy()
    # Looked up as mitmproxy looks it up, so the same bodies take this path.
    name = headers.get("content-encoding", "")
    encoder = FAST_ENCODERS.get(name.lower())
    if encoder is not None:
        raw = encoder(body)
    else:
        try:
            raw = encoding.encode(body, name or "identity")
        except ValueError:
            # mitmproxy's setter drops an encoding it cannot write.
            del headers["content-encoding"]
            raw = body
    if "transfer-encoding" not in headers:
        headers["content-length"] = str(len(raw))
    return EncodedBody(raw, headers)
