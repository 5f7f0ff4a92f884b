"""The upstream of the load benchmark (and of the tests that hang up on the
gateway): an HTTP/1.1 server on 127.0.0.1 whose answers are known in
advance, so that a client can check every byte it gets, and which counts
its open connections.

Routes (the query's ``id`` picks the answer, never the request body, which
obsmask may have masked):

- ``POST .../chat/completions?id=N``, ``.../v1/messages?id=N`` (Anthropic)
  and ``.../v1/responses?id=N`` (OpenAI Responses): a JSON answer of that
  format (``ANSWERS``); with ``&sse=1`` an event stream of that format, one
  chunk per event, ``&parts=P`` text deltas (default 5), ``&every_ms=T``
  between events (default none);
- ``POST /mcp?id=N`` (and ``.../rpc?id=N``, the gateway's path, for a proxy
  without the gateway): a JSON-RPC result with a short text (``mcp_answer``,
  under the cut limit: it passes unchanged); with ``&chars=C`` a text of C
  characters (``mcp_answer(n, C)``);
- ``GET /big?size=S``: S bytes of JSON (``big_answer``);
- ``/reset``: the head and one event of a stream, then a TCP reset;
- ``/silent``: never answers; waits (at most ``HOLD_SECONDS``) for the
  client's end;
- ``/slow-sse``: one event every ``SLOW_EVENT_SECONDS`` until the client
  leaves (at most ``HOLD_SECONDS``);
- ``/html``: a 502 HTML page;
- ``/bad-gzip?echo=E``: a JSON-RPC result holding E, declared gzip, not gzip;
- ``/junk?echo=E``: E and a line end, no HTTP.

With ``&tag=T`` in the query, the stub keeps the size of the request body it
received under T (``received``): how much of a body obsmask masked away.
"""

from __future__ import annotations

import http.server
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit

HOLD_SECONDS = 30.0
SLOW_EVENT_SECONDS = 0.1


def chat_answer(n: int) -> bytes:
    return json.dumps({
        "id": f"chatcmpl-{n}", "object": "chat.completion", "model": "stub",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": f"answer {n} " + "x" * 200}}],
        "usage": {"prompt_tokens": 1000 + n, "completion_tokens": 10, "total_tokens": 1010 + n},
    }).encode()


def sse_events(n: int, parts: int = 5) -> list[bytes]:
    """A Chat Completions event stream: ``parts`` deltas, the usage, [DONE]."""
    events = [
        b"data: " + json.dumps({"id": f"c-{n}", "object": "chat.completion.chunk",
                                "choices": [{"index": 0, "delta": {"content": f"part {i} "}}]}
                               ).encode() + b"\n\n"
        for i in range(parts)
    ]
    usage = {"id": f"c-{n}", "object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 1000 + n, "completion_tokens": 5, "total_tokens": 1005 + n}}
    return [*events, b"data: " + json.dumps(usage).encode() + b"\n\n", b"data: [DONE]\n\n"]


def _event(name: str, data: dict[str, object]) -> bytes:
    return f"event: {name}\ndata: ".encode() + json.dumps(data).encode() + b"\n\n"


def anthropic_answer(n: int) -> bytes:
    return json.dumps({
        "id": f"msg_{n}", "type": "message", "role": "assistant", "model": "stub",
        "content": [{"type": "text", "text": f"answer {n} " + "x" * 200}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 1000 + n, "output_tokens": 10,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    }).encode()


def anthropic_events(n: int, parts: int = 5) -> list[bytes]:
    """An Anthropic Messages event stream, as the API sends it."""
    usage = {"input_tokens": 1000 + n, "output_tokens": 1,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    return [
        _event("message_start", {"type": "message_start", "message": {
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": "stub",
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}),
        _event("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}}),
        *(_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": f"part {i} "}})
          for i in range(parts)),
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                 "usage": {"output_tokens": 10}}),
        _event("message_stop", {"type": "message_stop"}),
    ]


def _response(n: int, status: str, text: str) -> dict[str, object]:
    output = [{"type": "message", "id": f"msg_{n}", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}]
    return {"id": f"resp_{n}", "object": "response", "status": status, "model": "stub",
            "output": output if status == "completed" else [],
            "usage": {"input_tokens": 1000 + n, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 1010 + n} if status == "completed" else None}


def responses_answer(n: int) -> bytes:
    return json.dumps(_response(n, "completed", f"answer {n} " + "x" * 200)).encode()


def responses_events(n: int, parts: int = 5) -> list[bytes]:
    """An OpenAI Responses event stream, as the API sends it."""
    return [
        _event("response.created", {"type": "response.created",
                                     "response": _response(n, "in_progress", "")}),
        *(_event("response.output_text.delta", {
            "type": "response.output_text.delta", "item_id": f"msg_{n}", "output_index": 0,
            "content_index": 0, "delta": f"part {i} "}) for i in range(parts)),
        _event("response.completed", {"type": "response.completed", "response": _response(
            n, "completed", "".join(f"part {i} " for i in range(parts)))}),
    ]


# The answers of each conversation route (the last part of its path): JSON,
# and event stream.
ANSWERS: dict[str, tuple[Callable[[int], bytes], Callable[[int, int], list[bytes]]]] = {
    "completions": (chat_answer, sse_events),
    "messages": (anthropic_answer, anthropic_events),
    "responses": (responses_answer, responses_events),
}


def mcp_answer(n: int, chars: int = 0) -> bytes:
    """A JSON-RPC result whose text has ``chars`` characters (1,013 or so
    when 0: under the cut limit)."""
    text = f"tool output {n} "
    text += "y" * (chars - len(text)) if chars else "y" * 1000
    return json.dumps({"jsonrpc": "2.0", "id": n, "result": {
        "content": [{"type": "text", "text": text}], "isError": False}}).encode()


def big_answer(size: int) -> bytes:
    head = b'{"pad": "'
    return head + b"z" * max(0, size - len(head) - 2) + b'"}'


PROGRESS_EVENT = b'data: {"jsonrpc": "2.0", "method": "notifications/progress"}\n\n'
HTML_PAGE = b"<html><body>Bad Gateway</body></html>"


class LoadStub:
    """The server; ``open`` is how many connections it holds now."""

    def __init__(self) -> None:
        self.open = 0
        self.accepted = 0
        self.requests = 0
        self.received: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # A head and a body written apart must not wait for the proxy's
            # delayed ACK (Nagle's algorithm: up to 40 ms an answer).
            disable_nagle_algorithm = True

            def setup(self) -> None:
                super().setup()
                self.connection.settimeout(HOLD_SECONDS)
                with stub._lock:
                    stub.open += 1
                    stub.accepted += 1

            def finish(self) -> None:
                try:
                    super().finish()
                except OSError:
                    pass
                finally:
                    with stub._lock:
                        stub.open -= 1

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                with stub._lock:
                    stub.requests += 1
                    if "tag" in query:
                        stub.received[query["tag"][0]] = length
                n = int(query.get("id", ["0"])[0])
                route = url.path.rsplit("/", 1)[-1]
                try:
                    stub._answer(self, route, n, query)
                except OSError:
                    self.close_connection = True  # the client left: fine

            do_GET = do_POST = do_DELETE = _handle

            def log_message(self, format: str, *args: object) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 256  # the clients connect all at once
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _answer(self, h: http.server.BaseHTTPRequestHandler, route: str, n: int,
                query: dict[str, list[str]]) -> None:
        if route in ANSWERS and "sse" not in query:
            _send(h, 200, "application/json", ANSWERS[route][0](n))
        elif route in ANSWERS:
            parts = int(query.get("parts", ["5"])[0])
            every = float(query.get("every_ms", ["0"])[0]) / 1000
            _stream(h, "text/event-stream", ANSWERS[route][1](n, parts), every)
        elif route in ("mcp", "rpc"):
            _send(h, 200, "application/json", mcp_answer(n, int(query.get("chars", ["0"])[0])))
        elif route == "big":
            _send(h, 200, "application/json", big_answer(int(query.get("size", ["0"])[0])))
        elif route == "html":
            _send(h, 502, "text/html", HTML_PAGE)
        elif route == "bad-gzip":  # declared gzip, is not; says what ``echo`` says
            echo = query.get("echo", [""])[0]
            body = json.dumps({"jsonrpc": "2.0", "id": n, "result": {"echo": echo}}).encode()
            h.send_response(200)
            h.send_header("content-type", "application/json")
            h.send_header("content-encoding", "gzip")
            h.send_header("content-length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        elif route == "junk":  # not HTTP at all: ``echo`` and a line end
            h.close_connection = True
            h.wfile.write(query.get("echo", [""])[0].encode() + b" is no status line\r\n\r\n")
        elif route == "reset":
            _stream_head(h, "text/event-stream")
            _chunk(h, PROGRESS_EVENT)
            time.sleep(0.05)
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.close_connection = True
            h.connection.close()
        elif route == "silent":
            h.close_connection = True
            _wait_for_end(h.connection, self._stopping)
        elif route == "slow-sse":
            _stream_head(h, "text/event-stream")
            deadline = time.monotonic() + HOLD_SECONDS
            while time.monotonic() < deadline and not self._stopping.is_set():
                _chunk(h, PROGRESS_EVENT)  # OSError once the client has left
                time.sleep(SLOW_EVENT_SECONDS)
            h.close_connection = True
        else:
            _send(h, 404, "text/plain", b"no such route")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)

    def wait_until_closed(self, timeout: float) -> int:
        """The connections still open after at most ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while self.open and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.open


def _send(h: http.server.BaseHTTPRequestHandler, status: int, content_type: str,
          body: bytes) -> None:
    h.send_response(status)
    h.send_header("content-type", content_type)
    h.send_header("content-length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def _stream_head(h: http.server.BaseHTTPRequestHandler, content_type: str) -> None:
    h.send_response(200)
    h.send_header("content-type", content_type)
    h.send_header("transfer-encoding", "chunked")
    h.end_headers()
    h.wfile.flush()


def _chunk(h: http.server.BaseHTTPRequestHandler, data: bytes) -> None:
    h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    h.wfile.flush()


def _stream(h: http.server.BaseHTTPRequestHandler, content_type: str,
            events: list[bytes], every: float = 0.0) -> None:
    """The events, one chunk each, ``every`` s apart."""
    _stream_head(h, content_type)
    for i, event in enumerate(events):
        if i and every:
            time.sleep(every)
        _chunk(h, event)
    h.wfile.write(b"0\r\n\r\n")
    h.wfile.flush()


def _wait_for_end(sock: socket.socket, stopping: threading.Event) -> None:
    """Read until the peer closes (or HOLD_SECONDS pass, or the stub stops)."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + HOLD_SECONDS
    while time.monotonic() < deadline and not stopping.is_set():
        try:
            if not sock.recv(4096):
                return
        except TimeoutError:
            continue
        except OSError:
            return


@contextmanager
def load_stub() -> Iterator[LoadStub]:
    stub = LoadStub()
    stub.start()
    try:
        yield stub
    finally:
        stub.stop()
