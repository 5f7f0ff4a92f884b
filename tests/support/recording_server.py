"""A small HTTP server on 127.0.0.1 that records every request it receives.

The end-to-end tests put it behind mitmdump as the "provider": what it
records is what obsmask forwarded. A responder function decides each answer;
an answer may be a list of chunks sent one by one (for SSE), with a callable
in the list to wait on between chunks.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})
    # bytes: one body. A list: chunks written and flushed one by one (chunked
    # transfer encoding); a callable in it is called between chunks.
    body: bytes | list[bytes | Callable[[], None]] = b""


Responder = Callable[[Recorded], Answer]


class RecordingServer:
    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                recorded = Recorded(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                with server._lock:
                    server.requests.append(recorded)
                answer = server.responder(recorded)
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                if isinstance(answer.body, bytes):
                    self.send_header("content-length", str(len(answer.body)))
                    self.end_headers()
                    self.wfile.write(answer.body)
                    return
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for chunk in answer.body:
                    if callable(chunk):
                        chunk()
                        continue
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            do_GET = do_POST = do_PUT = do_DELETE = _handle

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)

    def posts(self, path_suffix: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path.endswith(path_suffix)]


@contextmanager
def recording_server(responder: Responder) -> Iterator[RecordingServer]:
    server = RecordingServer(responder)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def common_prefix_length(a: bytes, b: bytes) -> int:
    """How many bytes ``a`` and ``b`` share from their start: what a prompt
    cache keyed on exact prefixes would serve a scripted server's caller."""
    n = min(len(a), len(b))
    low, high = 0, n
    while low < high:  # the longest equal prefix, by halves
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class ServedRequest(Protocol):
    """A request a scripted server answered (``scripted_anthropic.Served``,
    ``scripted_responses.Served``)."""

    @property
    def kind(self) -> str: ...

    @property
    def recorded(self) -> Recorded: ...


def keep_bodies(folder: Path, served: Sequence[ServedRequest]) -> None:
    """Every body a scripted server received, in files, to read after a failure."""
    folder.mkdir()
    for number, one in enumerate(served):
        (folder / f"{number:02d}-{one.kind}.json").write_bytes(one.recorded.body)
