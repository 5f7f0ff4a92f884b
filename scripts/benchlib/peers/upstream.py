"""The one upstream every proxy of the peers bench forwards to: an HTTP/1.1
server on 127.0.0.1, on a port the system picks, that answers each wire
format (``benchlib.peers.answers``) and records every request it receives,
with the answer it gave.

The bench sends one request at a time, so the records made while a client
request is in flight are what the proxy forwarded for it (``mark`` and
``since``). A POST to a route of none of the formats is answered 404 and
recorded too: a proxy's own calls (token counting, model lists) show up
there. A body sent compressed (gzip, deflate) is recorded decompressed.
"""

from __future__ import annotations

import http.server
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from benchlib.peers.answers import answer
from benchlib.peers.wire import format_of_path

_SHUTDOWN_TIMEOUT = 10.0


@dataclass(frozen=True)
class Received:
    """One request as the upstream got it, and what it answered."""

    method: str
    path: str
    fmt: str | None
    body: bytes
    content_encoding: str
    status: int
    answer: bytes


def _decoded(body: bytes, encoding: str) -> bytes:
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The head and the body go in two writes: without this, Nagle's
    # algorithm and the client's delayed ACK hold the body back, a wait the
    # latency figures would count as the proxy's.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the bench prints its own progress."""

    def _body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _answer(self) -> None:
        raw = self._body() if self.command in ("POST", "PUT", "PATCH") else b""
        encoding = self.headers.get("content-encoding", "").lower()
        try:
            body = _decoded(raw, encoding)
        except zlib.error:
            body = raw
        fmt = format_of_path(self.path) if self.command == "POST" else None
        if fmt is None:
            status, sent = 404, b'{"error": {"type": "not_found", "message": "not a route"}}'
        else:
            status, sent = 200, answer(fmt, self.server.next_number(), body)
        self.server.record(Received(self.command, self.path, fmt, body, encoding, status, sent))
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(sent)))
        self.end_headers()
        self.wfile.write(sent)

    do_POST = _answer
    do_GET = _answer


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self._lock = threading.Lock()
        self.records: list[Received] = []
        self._count = 0

    def next_number(self) -> int:
        with self._lock:
            self._count += 1
            return self._count

    def record(self, received: Received) -> None:
        with self._lock:
            self.records.append(received)


class RecordingUpstream:
    """The running server: its URL, and what it received."""

    def __init__(self, server: _Server) -> None:
        self._server = server

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def mark(self) -> int:
        """A position in the records, for ``since``."""
        with self._server._lock:
            return len(self._server.records)

    def since(self, mark: int) -> list[Received]:
        with self._server._lock:
            return list(self._server.records[mark:])


@contextmanager
def recording_upstream() -> Iterator[RecordingUpstream]:
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield RecordingUpstream(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(_SHUTDOWN_TIMEOUT)
