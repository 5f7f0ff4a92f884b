"""The speed figures of the load benchmark (issue 15, "speed under load"),
plain mitmproxy against obsmask, measured in the same run:

- ``LoadFigures``: the load phases of one proxy: requests per second, the
  proxy's CPU time per request (``procfs.cpu_seconds``), latency p50/p99,
  overall and per kind, and the gateway's p50 over the direct MCP route's;
- ``stream_under_load``: the longest gap between two chunks of an event
  stream, as its client reads them, while other clients send 10 MB chat
  bodies through the same proxy;
- ``no_load``: one client alone: the median time of a request through
  each proxy, the two taking turns, for chat bodies of 100 KB to 10 MB and
  a 200,000-character MCP answer (direct and through the gateway);
- ``speed_report``: all of it, with the ratios obsmask / plain and the
  issue's targets, each said met or not.

Times are the client's: from a request's first byte sent to its answer's
last byte read, in the benchmark's own process (which also runs the stub),
so each figure holds that process's overhead too, the same for both
proxies: compare the two, not the figures alone."""

from __future__ import annotations

import http.client
import itertools
import math
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

from benchlib.load.cases import CLIENT_TIMEOUT, Tally, exchange
from benchlib.load.mix import (
    AGENTS,
    CHAT,
    GATEWAY,
    MCP_BIG_CHARS,
    Mix,
    Request,
    conversation_request,
    mcp_request,
)
from benchlib.load.proxy_metrics import Spent
from benchlib.load.stub import sse_events
from benchlib.timing import Action, medians_ms

# The slow stream of ``stream_under_load``: an event every STREAM_EVERY_MS.
STREAM_PARTS = 200
STREAM_EVERY_MS = 10
# The 10 MB bodies meanwhile: BIG_SENDERS clients, each starting one every
# BIG_EVERY_S (or as soon as its last is answered, when that is later), so
# that both proxies are offered the same bodies, not as many as each can take.
BIG_SENDERS = 2
BIG_EVERY_S = 0.5
BIG_TAG = "10mb"
# The bodies of ``no_load`` (keys of Bodies.chat_sized) and the MCP cases.
NO_LOAD_CHAT = ["100 KB", "280 KB", "1.5 MB", "10 MB"]
NO_LOAD_MCP = {"mcp 200k direct": "/mcp", "mcp 200k gateway": GATEWAY}


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of ``values``; 0.0 if none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def ratio(over: float, under: float) -> float | None:
    return round(over / under, 3) if under else None


@dataclass
class LoadFigures:
    """The load phases of one proxy, summed over the rounds."""

    requests: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    # The benchmark's own process (clients and stub): when it nears one
    # core, requests per second say as much about it as about the proxy.
    client_cpu_seconds: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=dict)
    # What obsmask's own metrics say it spent in the phases (plain mitmproxy:
    # None), and in how many phases they answered.
    spent: Spent | None = None
    phases: int = 0
    phases_spent: int = 0

    def add(self, tallies: dict[str, Tally], seconds: float, cpu_seconds: float,
            client_cpu_seconds: float, spent: Spent | None = None) -> None:
        """One load phase: its tallies, its wall time, the proxy's CPU time
        and the benchmark process's, and what obsmask's metrics say it spent."""
        self.requests += sum(t.requests for t in tallies.values())
        self.seconds += seconds
        self.cpu_seconds += cpu_seconds
        self.client_cpu_seconds += client_cpu_seconds
        self.phases += 1
        if spent is not None:
            self.phases_spent += 1
            self.spent = spent if self.spent is None else self.spent.plus(spent)
        for kind, tally in tallies.items():
            self.latencies.setdefault(kind, []).extend(tally.seconds)

    def spent_in_every_phase(self) -> Spent | None:
        """What obsmask's metrics say it spent, when they answered before
        and after every phase (else its sums cover only some requests)."""
        return self.spent if self.phases_spent == self.phases else None

    def p50(self, kind: str) -> float:
        return percentile(self.latencies.get(kind, []), 0.5)

    def as_json(self) -> dict[str, object]:
        every = [s for values in self.latencies.values() for s in values]
        return {
            "requests": self.requests,
            "seconds": round(self.seconds, 1),
            "requests_per_s": round(self.requests / self.seconds, 1) if self.seconds else 0.0,
            "cpu_s": round(self.cpu_seconds, 2),
            "cpu_ms_per_request": (round(self.cpu_seconds * 1000 / self.requests, 3)
                                   if self.requests else 0.0),
            "benchmark_process_cpu_s": round(self.client_cpu_seconds, 2),
            "latency_p50_ms": _ms(percentile(every, 0.5)),
            "latency_p99_ms": _ms(percentile(every, 0.99)),
            "routes": {kind: {"requests": len(values), "p50_ms": _ms(percentile(values, 0.5)),
                              "p99_ms": _ms(percentile(values, 0.99))}
                       for kind, values in self.latencies.items()},
            "gateway_over_direct_p50": ratio(self.p50("mcp-200k-gateway"),
                                              self.p50("mcp-200k")),
        }


# The longest gap of a stream --------------------------------------------------


@dataclass
class StreamRun:
    """One stream read while 10 MB bodies went through the proxy."""

    longest_gap_s: float
    span_s: float  # from the first read to the last
    chunks: int  # reads that brought bytes
    body_ok: bool
    big_bodies: int  # 10 MB bodies answered while the stream went on

    @property
    def streamed(self) -> bool:
        """The reads spread over at least half the time the stub took to
        send the events: a proxy that held the stream would hand it over at
        once, with no gap to speak of."""
        return self.span_s >= STREAM_PARTS * STREAM_EVERY_MS / 1000 / 2

    def as_json(self) -> dict[str, object]:
        return {"longest_gap_ms": _ms(self.longest_gap_s), "span_ms": _ms(self.span_s),
                "chunks_read": self.chunks, "body_ok": self.body_ok,
                "10mb_bodies_during_stream": self.big_bodies}


def _dechunk(data: bytes) -> bytes | None:
    """The body of a chunked message; None if it is not whole."""
    out = bytearray()
    while True:
        size_line, found, data = data.partition(b"\r\n")
        if not found:
            return None
        try:
            size = int(size_line.split(b";")[0] or b"0", 16)
        except ValueError:
            return None
        if size == 0:
            return bytes(out)
        out += data[:size]
        data = data[size + 2:]


def read_stream(port: int, path: str, body: bytes) -> tuple[list[float], bytes | None]:
    """POST ``body`` to ``path`` on a connection of its own and read the
    answer to its end: the time of every read that brought bytes, and the
    answer's body (None if it did not come whole)."""
    head = (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()
    times: list[float] = []
    data = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT) as sock:
        sock.sendall(head + body)
        while chunk := sock.recv(65536):
            times.append(time.perf_counter())
            data += chunk
            if data.endswith(b"\r\n0\r\n\r\n"):
                break
    header, _, content = bytes(data).partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in header.lower():
        return times, _dechunk(content)
    return times, content


def stream_under_load(port: int, mix: Mix, n: int, tally: Tally) -> StreamRun:
    """Read a Chat Completions event stream of STREAM_PARTS events, one
    every STREAM_EVERY_MS, while BIG_SENDERS clients send the 10 MB chat
    body through the same proxy, each one every BIG_EVERY_S, the senders
    evenly apart (from a moment before the stream begins to its end): the
    longest gap between two reads of the stream. Every answer, the stream's
    and the 10 MB bodies', is checked and counted in ``tally``."""
    big = mix.bodies.chat_sized["10 MB"]
    stop = threading.Event()
    answered: list[float] = []

    begin = time.perf_counter()

    def sender(s: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
        try:
            i = 0
            while not stop.wait(max(0.0, begin + (s / BIG_SENDERS + i) * BIG_EVERY_S
                                    - time.perf_counter())):
                exchange(connection, _big_request(n * 1000 + s * 100 + i, mix.fresh_body(big)),
                         tally)
                answered.append(time.perf_counter())
                i += 1
        finally:
            connection.close()

    senders = [threading.Thread(target=sender, args=(s,), daemon=True)
               for s in range(BIG_SENDERS)]
    for thread in senders:
        thread.start()
    time.sleep(BIG_EVERY_S / BIG_SENDERS / 2)  # the first 10 MB body is on its way
    path = f"{CHAT}?id={n}&sse=1&parts={STREAM_PARTS}&every_ms={STREAM_EVERY_MS}"
    started = time.perf_counter()
    times: list[float] = []
    body: bytes | None = None
    try:
        times, body = read_stream(port, path, mix.bodies.chat[0])
    except OSError as e:
        tally.add(error=f"stream: {type(e).__name__}: {e}")
    ended = time.perf_counter()
    stop.set()
    for thread in senders:
        thread.join(CLIENT_TIMEOUT)
    expected = b"".join(sse_events(n, STREAM_PARTS))
    if times:
        tally.add(wrong=None if body == expected else
                  f"stream: {len(body or b'')} bytes, not the {len(expected)} sent",
                  seconds=ended - started)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return StreamRun(max(gaps, default=0.0), times[-1] - times[0] if times else 0.0, len(times),
                     body == expected, sum(started <= t <= ended for t in answered))


def _big_request(n: int, body: bytes) -> Request:
    return conversation_request("chat-10mb", CHAT, n, body, False, query=f"&tag={BIG_TAG}")


@dataclass
class Streams:
    """The stream runs of one proxy, and what became of its 10 MB bodies."""

    runs: list[StreamRun] = field(default_factory=list)
    big_body_bytes: int = 0
    upstream_bytes: int = 0  # what the stub received of the last one

    @property
    def longest_gap_s(self) -> float:
        return max((r.longest_gap_s for r in self.runs), default=0.0)

    @property
    def streamed(self) -> bool:
        return bool(self.runs) and all(r.streamed for r in self.runs)

    def as_json(self) -> dict[str, object]:
        return {
            "longest_gap_ms": _ms(self.longest_gap_s),
            "streamed": self.streamed,
            "streams": [r.as_json() for r in self.runs],
            "10mb_body_bytes": self.big_body_bytes,
            "10mb_body_bytes_upstream": self.upstream_bytes,
        }


# One client, no load ------------------------------------------------------------


@dataclass(frozen=True)
class NoLoadCase:
    """A request sent alone through both proxies in turn."""

    request_bytes: int
    answer_bytes: int  # as the stub sends it
    requests: int  # timed, through each proxy
    medians_ms: dict[str, float]

    @property
    def added_ms(self) -> float:
        return self.medians_ms["obsmask"] - self.medians_ms["plain"]

    def as_json(self) -> dict[str, object]:
        return {"request_bytes": self.request_bytes, "answer_bytes": self.answer_bytes,
                "requests": self.requests,
                **{f"{v}_ms": round(ms, 2) for v, ms in self.medians_ms.items()},
                "added_ms": round(self.added_ms, 2)}


def no_load(ports: dict[str, int], mixes: dict[str, Mix], budget: float, minimum: int,
            maximum: int) -> tuple[dict[str, NoLoadCase], dict[str, Tally]]:
    """For each case, the median ms of a request through each proxy (one
    kept-alive connection per proxy, the proxies taking turns, as many
    requests as fit in ``budget`` s for the slower, within [minimum,
    maximum], after two untimed ones), and the tallies of their answers."""
    connections = {v: http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
                   for v, port in ports.items()}
    tallies = {v: Tally() for v in ports}
    cases: dict[str, NoLoadCase] = {}
    try:
        for name in [f"chat {size}" for size in NO_LOAD_CHAT] + list(NO_LOAD_MCP):
            requests = {v: _no_load_request(name, mix, 7) for v, mix in mixes.items()}
            before: dict[str, Action] | None = None
            makers: dict[str, Callable[[], Request]]
            if name in NO_LOAD_MCP or any(mix.mode != AGENTS for mix in mixes.values()):
                # With fresh bodies, each request is built anew, inside the
                # timed action: the same copy of the body for both proxies.
                makers = {v: partial(_no_load_request, name, mix, 7)
                          for v, mix in mixes.items()}
            else:
                # An agent's next request: its previous one goes first, untimed.
                pairs = {v: _NextRequests(name, mix) for v, mix in mixes.items()}
                makers = {v: pair.next for v, pair in pairs.items()}
                before = _actions(connections, {v: pair.previous for v, pair in pairs.items()},
                                  tallies)
            actions = _actions(connections, makers, tallies)
            for v, action in [*actions.items(), *actions.items()]:
                if before is not None:
                    before[v]()
                action()  # untimed: the first of a size may warm caches up
            medians, repeat = medians_ms(actions, None, budget, minimum, maximum, before)
            stub_answer = mcp_request(7, chars=MCP_BIG_CHARS).expected if name in NO_LOAD_MCP \
                else requests["plain"].expected
            cases[name] = NoLoadCase(len(requests["plain"].body), len(stub_answer), repeat,
                                     medians)
    finally:
        for connection in connections.values():
            connection.close()
    return cases, tallies


class _NextRequests:
    """Pairs of one conversation's requests (``Mix.next_request_pair``):
    ``previous`` makes a pair and gives its first, ``next`` its second."""

    def __init__(self, name: str, mix: Mix) -> None:
        self.size = name.removeprefix("chat ")
        self.name = name
        self.mix = mix
        self._next: bytes | None = None

    def previous(self) -> Request:
        first, self._next = self.mix.next_request_pair(self.size)
        return conversation_request(self.name, CHAT, 7, first, False)

    def next(self) -> Request:
        if self._next is None:
            raise RuntimeError("the previous request comes first")
        body, self._next = self._next, None
        return conversation_request(self.name, CHAT, 7, body, False)


def _no_load_request(name: str, mix: Mix, n: int) -> Request:
    if name in NO_LOAD_MCP:
        return mcp_request(n, name, NO_LOAD_MCP[name], MCP_BIG_CHARS, mix.cuts)
    body = mix.bodies.chat_sized[name.removeprefix("chat ")]
    return conversation_request(name, CHAT, n, mix.fresh_body(body), False)


def _actions(connections: dict[str, http.client.HTTPConnection],
             makers: Mapping[str, Callable[[], Request]],
             tallies: dict[str, Tally]) -> dict[str, Action]:
    def one(v: str) -> Action:
        return lambda: exchange(connections[v], makers[v](), tallies[v])

    return {v: one(v) for v in connections}


# The report ---------------------------------------------------------------------


def target(value: float | None, limit: float, at_most: bool = True,
           unit: str = "") -> dict[str, object]:
    """A target: its value, its bound, and whether it is met."""
    met = value is not None and (value <= limit if at_most else value >= limit)
    return {"value": value, "target": f"{'<=' if at_most else '>='} {limit:g}{unit}", "met": met}


def load_ratios(over: LoadFigures, under: LoadFigures) -> dict[str, float | None]:
    """``over``'s CPU time per request and requests per second over ``under``'s."""

    def per_request(f: LoadFigures) -> float:
        return f.cpu_seconds / f.requests if f.requests else 0.0

    def rate(f: LoadFigures) -> float:
        return f.requests / f.seconds if f.seconds else 0.0

    return {"cpu_per_request": ratio(per_request(over), per_request(under)),
            "requests_per_s": ratio(rate(over), rate(under))}


def speed_report(load: dict[str, LoadFigures], streams: dict[str, Streams],
                 quiet: dict[str, NoLoadCase], clients: int) -> dict[str, object]:
    """The ``speed`` block of the benchmark's JSON document: the figures of
    each proxy, the ratios obsmask / plain, the no-load cases and the
    issue's targets."""
    plain, obsmask = load["plain"], load["obsmask"]
    every = {v: [s for values in f.latencies.values() for s in values] for v, f in load.items()}
    ratios = {
        **load_ratios(obsmask, plain),
        "latency_p50": ratio(percentile(every["obsmask"], 0.5), percentile(every["plain"], 0.5)),
        "latency_p99": ratio(percentile(every["obsmask"], 0.99),
                              percentile(every["plain"], 0.99)),
        "sse_longest_gap": ratio(streams["obsmask"].longest_gap_s, streams["plain"].longest_gap_s),
    }

    def added_ms(name: str) -> float | None:
        return round(quiet[name].added_ms, 2) if name in quiet else None

    gap = streams["obsmask"]
    targets = {
        "cpu_per_request_obsmask_over_plain": target(ratios["cpu_per_request"], 2),
        "requests_per_s_obsmask_over_plain": target(ratios["requests_per_s"], 0.5, False),
        # No figure when the stream was not streamed (its gaps say nothing).
        "sse_longest_gap_ms_obsmask": target(_ms(gap.longest_gap_s) if gap.streamed else None,
                                             100, unit=" ms"),
        "added_ms_chat_100KB": target(added_ms("chat 100 KB"), 1, unit=" ms"),
        "added_ms_chat_1.5MB": target(added_ms("chat 1.5 MB"), 10, unit=" ms"),
        "added_ms_mcp_200k_direct": target(added_ms("mcp 200k direct"), 3, unit=" ms"),
        "added_ms_mcp_200k_gateway": target(added_ms("mcp 200k gateway"), 3, unit=" ms"),
        "gateway_over_direct_p50_obsmask": target(
            ratio(obsmask.p50("mcp-200k-gateway"), obsmask.p50("mcp-200k")), 1.2),
    }
    return {
        "clients": clients,
        **{v: {**f.as_json(), "sse_under_10mb_load": streams[v].as_json()}
           for v, f in load.items()},
        "ratios": ratios,
        "no_load": {name: case.as_json() for name, case in quiet.items()},
        "targets": targets,
        "targets_met": sum(bool(t["met"]) for t in targets.values()),
        "targets_total": len(targets),
    }
