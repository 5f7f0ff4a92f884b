"""The clients of the load benchmark: concurrent requests (``benchlib.load.mix``)
whose answers are checked byte for byte against what the stub sent
(``benchlib.load.stub``), each one timed, and the fault cases, each a client
or a server that misbehaves. A fault case passes when the proxy ends the
exchange within ``FAULT_WAIT`` s (whatever it answers); it is an error when
the client is left hanging."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from benchlib.load.mix import CHAT, Request, jsonrpc_call, mcp_request
from benchlib.load.stub import big_answer

CLIENT_TIMEOUT = 30.0
FAULT_WAIT = 10.0
GIVE_UP_SECONDS = 1.0
# The names of the stub's routes behind the gateway (mcpmask_gateway_servers).
GATEWAY_SERVERS = {"stub": "/mcp", "silent": "/silent", "slow": "/slow-sse", "reset": "/reset",
                   "html": "/html"}


@dataclass
class Tally:
    """What a set of requests came to; ``seconds``: how long each answered
    request took, from its first byte sent to its answer's last byte read."""

    requests: int = 0
    errors: int = 0
    wrong_bodies: int = 0
    examples: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, error: str | None = None, wrong: str | None = None,
            seconds: float | None = None) -> None:
        with self._lock:
            self.requests += 1
            if seconds is not None:
                self.seconds.append(seconds)
            self.errors += error is not None
            self.wrong_bodies += wrong is not None
            problem = error or wrong
            if problem is not None and len(self.examples) < 5:
                self.examples.append(problem)

    def as_json(self) -> dict[str, object]:
        return {"requests": self.requests, "errors": self.errors,
                "wrong_bodies": self.wrong_bodies, "examples": self.examples}


def run_load(port: int, request_for: Callable[[int, int], Request], kinds: list[str],
             clients: int, per_client: int, first: int = 0) -> dict[str, Tally]:
    """``clients`` threads, each sending ``per_client`` requests on one
    kept-alive connection: client ``c`` its ``i``th request
    ``request_for(n, c + i)``, ``n`` being ``first + c * per_client + i``
    (the second argument picks the kind of ``kinds``: each client begins
    with another one and takes them in turn)."""
    tallies = {kind: Tally() for kind in kinds}

    def client(c: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
        try:
            for i in range(per_client):
                request = request_for(first + c * per_client + i, c + i)
                exchange(connection, request, tallies[request.kind])
        finally:
            connection.close()

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    return tallies


def exchange(connection: http.client.HTTPConnection, request: Request, tally: Tally) -> None:
    """Send ``request`` on ``connection``, read and check its answer, and
    count it (with its time) in ``tally``."""
    started = time.perf_counter()
    try:
        connection.request(request.method, request.path, body=request.body,
                           headers=request.headers)
        response = connection.getresponse()
        body = response.read()
    except (OSError, http.client.HTTPException) as e:
        connection.close()
        tally.add(error=f"{request.kind}: {type(e).__name__}: {e}")
        return
    seconds = time.perf_counter() - started
    if response.status != 200:
        reason = body[:160].decode("utf-8", "replace")
        tally.add(error=f"{request.kind}: HTTP {response.status}: {reason}", seconds=seconds)
    elif body != request.expected:
        tally.add(wrong=f"{request.kind} {request.path}: {len(body)} bytes, not the "
                        f"{len(request.expected)} expected", seconds=seconds)
    else:
        tally.add(seconds=seconds)


def keep_alive(port: int, total: int, connections: int) -> Tally:
    """``total`` small MCP requests over ``connections`` kept-alive connections."""
    tally = Tally()

    def one(c: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
        try:
            for n in range(c, total, connections):
                exchange(connection, mcp_request(n), tally)
        finally:
            connection.close()

    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(one, range(connections)))
    return tally


# Fault cases ------------------------------------------------------------------


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=FAULT_WAIT)
    sock.settimeout(FAULT_WAIT)
    return sock


def _head(method: str, path: str, length: int | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1", "content-type: application/json"]
    if length is not None:
        lines.append(f"content-length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_to_end(sock: socket.socket, size: int = 65536) -> bytes:
    """Everything until the proxy closes; TimeoutError if it does not."""
    data = b""
    while chunk := sock.recv(size):
        data += chunk
    return data


def upstream_reset(port: int, path: str) -> str | None:
    """The server resets the connection in the middle of a stream: the
    client's answer must end (not hang)."""
    with _connect(port) as sock:
        sock.sendall(_head("GET", path))
        try:
            _read_to_end(sock)
        except TimeoutError:
            return f"reset at {path}: the client was left waiting"
        except OSError:
            pass  # reset passed on: fine
    return None


def silent_upstream(port: int, path: str) -> str | None:
    """The server never answers; the client gives up after GIVE_UP_SECONDS."""
    body = jsonrpc_call(1)
    with _connect(port) as sock:
        sock.sendall(_head("POST", path, len(body)) + body)
        sock.settimeout(GIVE_UP_SECONDS)
        try:
            data = sock.recv(1)
        except TimeoutError:
            return None
        if data:
            return f"silent at {path}: an answer came"
    return None


def gone_mid_upload(port: int) -> str | None:
    """The client announces 1 MB, sends 64 KB and leaves."""
    with _connect(port) as sock:
        sock.sendall(_head("POST", f"{CHAT}?id=1", 1 << 20) + b"[" * (64 << 10))
    return None


def gone_mid_stream(port: int, path: str) -> str | None:
    """The client reads the first event of a long stream and leaves (both
    proxies stream event streams: obsmask, and plain mitmproxy with the
    benchmark's ``stream_sse`` addon)."""
    with _connect(port) as sock:
        sock.sendall(_head("GET", path) if not path.startswith("/api/")
                     else _head("POST", path, len(jsonrpc_call(1))) + jsonrpc_call(1))
        data = b""
        try:
            while b"notifications/progress" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    return f"stream at {path}: ended before its first event"
                data += chunk
        except TimeoutError:
            return f"stream at {path}: no event within {FAULT_WAIT:g} s"
    return None


def slow_reader(port: int, size: int) -> str | None:
    """The client reads its answer one byte at a time."""
    with _connect(port) as sock:
        sock.sendall(b"GET /big?size=%d HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"
                     % size)
        try:
            data = _read_to_end(sock, 1)
        except TimeoutError:
            return "slow reader: the answer stopped"
    head, _, body = data.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        body = _dechunk(body)
    return None if body == big_answer(size) else f"slow reader: {len(body)} bytes, wrong"


def _dechunk(data: bytes) -> bytes:
    out = b""
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            return out
        out, data = out + data[:size], data[size + 2:]


def fault_cases(port: int, gateway: bool) -> list[tuple[str, Callable[[], str | None]]]:
    """The fault cases for a proxy on ``port``; ``gateway``: obsmask's, with
    its gateway cases."""
    cases: list[tuple[str, Callable[[], str | None]]] = [
        ("upstream reset mid-stream", lambda: upstream_reset(port, "/reset")),
        ("upstream silent, client gives up", lambda: silent_upstream(port, "/silent")),
        ("client gone mid-upload", lambda: gone_mid_upload(port)),
        ("client gone mid-stream", lambda: gone_mid_stream(port, "/slow-sse")),
        ("client reads one byte at a time", lambda: slow_reader(port, 20_000)),
    ]
    if gateway:
        cases += [
            ("gateway: upstream reset mid-stream",
             lambda: upstream_reset(port, "/api/mcp-gateway/reset/rpc")),
            ("gateway: upstream silent, client gives up",
             lambda: silent_upstream(port, "/api/mcp-gateway/silent/rpc")),
            ("gateway: client gone mid-stream",
             lambda: gone_mid_stream(port, "/api/mcp-gateway/slow/rpc")),
        ]
    return cases


def run_faults(port: int, gateway: bool, repeat: int) -> dict[str, Tally]:
    """Each fault case ``repeat`` times, all at once."""
    cases = fault_cases(port, gateway)
    tallies = {name: Tally() for name, _ in cases}

    def run(item: tuple[str, Callable[[], str | None]]) -> None:
        name, case = item
        try:
            problem = case()
        except OSError as e:
            problem = f"{name}: {type(e).__name__}: {e}"
        tallies[name].add(error=problem)

    with ThreadPoolExecutor(len(cases) * repeat) as pool:
        list(pool.map(run, cases * repeat))
    return tallies


def settle(open_counts: Callable[[], int], timeout: float) -> float:
    """Seconds until ``open_counts()`` is 0 (``timeout`` at most)."""
    start = time.monotonic()
    while open_counts() and time.monotonic() - start < timeout:
        time.sleep(0.1)
    return time.monotonic() - start
