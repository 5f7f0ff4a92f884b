"""Work a hook puts off (``flows.after_this_turn``: obsmask's log lines,
the totals' count) comes after mitmproxy has written what the hook let
through, in a real mitmdump: the request to the server, the answer to the
client. Told apart by the wire, not by the clock: the work holds the event
loop while it asks a server that waits for the request (or for the
client's word that the answer came); what was not written before the work
began cannot come while it waits."""

from __future__ import annotations

import http.client
import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.processes import REPO, MitmdumpProcess

pytestmark = pytest.mark.e2e

PROBE_SCRIPT = REPO / "tests" / "support" / "deferred_work_probe.py"
FLOWS = 4
# How long the server waits for what the work asks about: far longer than
# a write on the loopback, far shorter than the test's bound.
WAIT = 3.0


class Witness:
    """What the server saw: each probe's arrival, the client's word that
    each answer came, and what the work was told when it asked."""

    def __init__(self) -> None:
        self.events: dict[str, threading.Event] = {}
        self.told: dict[str, bool] = {}
        self.lock = threading.Lock()

    def event(self, key: str) -> threading.Event:
        with self.lock:
            return self.events.setdefault(key, threading.Event())


@contextmanager
def witness_server(witness: Witness) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # /probe/N, through mitmdump
            self.rfile.read(int(self.headers.get("content-length") or 0))
            witness.event(f"arrived{self.path.removeprefix('/probe')}").set()
            self._answer(b"probed")

        def do_GET(self) -> None:
            kind, _, number = self.path.strip("/").partition("/")
            if kind == "got":  # the client, directly: it has its answer
                witness.event(f"answered/{number}").set()
            else:  # the work, from inside mitmdump: arrived/N or answered/N
                told = witness.event(f"{kind}/{number}").wait(WAIT)
                with witness.lock:
                    witness.told[f"{kind}/{number}"] = told
            self._answer(b"ok")

        def _answer(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_work_put_off_by_a_hook_comes_after_the_request_and_the_answer_are_written(
        tmp_path: Path):
    witness = Witness()
    with witness_server(witness) as url:
        proxy = MitmdumpProcess(["--mode", f"reverse:{url}"], tmp_path, tmp_path / "confdir",
                                addon=PROBE_SCRIPT)
        try:
            port = proxy.wait_until_listening()
            server_port = int(url.rsplit(":", 1)[1])
            for number in range(FLOWS):
                client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                client.request("POST", f"/probe/{number}", body=b"{}")
                assert client.getresponse().read() == b"probed"
                client.close()
                direct = http.client.HTTPConnection("127.0.0.1", server_port, timeout=30)
                direct.request("GET", f"/got/{number}")
                direct.getresponse().read()
                direct.close()
            # The last work asks after the last answer: wait for its word.
            deadline = time.monotonic() + 2 * WAIT
            while len(witness.told) < 2 * FLOWS and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            proxy.stop()
    assert witness.told == {f"{kind}/{n}": True
                            for n in range(FLOWS) for kind in ("arrived", "answered")}
