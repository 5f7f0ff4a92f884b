"""The run: every session, request by request, through every proxy in turn
(the same request through each before the next request, so that a change in
the machine's load falls on all of them), one request in flight at a time,
against the one recording upstream.

Each session is analysed as soon as it is sent (its bodies are then
dropped): per proxy, its bill, what changed outside tool results, the
stability of its tool results, and each request's time.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from benchlib.load.procfs import cpu_seconds_once_idle
from benchlib.peers.billing import SessionBiller
from benchlib.peers.changes import ChangeTally, answer_changes, request_changes
from benchlib.peers.client import Answer, Client
from benchlib.peers.proxies import (
    HEADROOM_NAMES,
    NONE,
    OBSMASK,
    Proxy,
    Running,
    no_proxy,
    start_headroom,
    start_obsmask,
)
from benchlib.peers.stability import Stability, StabilityTally
from benchlib.peers.upstream import Received, RecordingUpstream, recording_upstream
from benchlib.peers.wire import LIST_MEMBERS
from obsmask_core.offline.cache.billing import SessionBill
from obsmask_core.offline.cache.block_tokens import MessageTokens, load_encoder
from obsmask_core.offline.cache.clients import ClientRequests, Request
from obsmask_core.offline.cache.sessions import Session, load_real_sessions

# --quick: the shortest shared session, in each format, cut to this many
# requests (enough for one bill so far from the 8th request).
QUICK_SESSION = "deepseek_chat_test_1-100__django__django-11039"
QUICK_REQUESTS = 12


@dataclass(frozen=True)
class RunOptions:
    sessions_folder: Path
    formats: tuple[str, ...]
    proxies: tuple[str, ...]
    quick: bool = False
    max_requests: int | None = None
    only: tuple[str, ...] = ()  # session file stems; empty: all
    obsmask_version: str = ""


@dataclass
class SessionFigures:
    """One proxy's figures for one session."""

    name: str
    fmt: str
    bill: SessionBill


@dataclass
class ProxyRun:
    proxy: Proxy
    sessions: list[SessionFigures] = field(default_factory=list)
    changes: ChangeTally = field(default_factory=ChangeTally)
    stability: StabilityTally = field(default_factory=StabilityTally)
    seconds: list[float] = field(default_factory=list)  # per request, in run order
    errors: int = 0
    error_examples: list[str] = field(default_factory=list)
    answered_without_upstream: int = 0
    extra_upstream_requests: int = 0
    cpu_seconds: float | None = None


@dataclass
class PeersRun:
    runs: dict[str, ProxyRun]
    sessions: list[str]
    requests: int
    seconds: float = 0.0


def _cut(session: Session, requests: int | None) -> Session:
    if requests is None or requests >= len(session.request_ends):
        return session
    return Session(session.name, session.kind, session.messages,
                   request_ends=session.request_ends[:requests], fmt=session.fmt,
                   preamble=session.preamble, members=session.members,
                   times=session.times[:requests])


def load_sessions(options: RunOptions) -> list[Session]:
    only = (QUICK_SESSION,) if options.quick and not options.only else options.only
    requests = options.max_requests or (QUICK_REQUESTS if options.quick else None)
    sessions = load_real_sessions(options.sessions_folder, options.formats)
    chosen = [s for s in sessions if not only or s.name.split("/", 1)[1] in only]
    return [_cut(session, requests) for session in chosen]


class _Replay:
    """One proxy's state while one session is sent."""

    def __init__(self, run: ProxyRun, session: Session, tokens: MessageTokens,
                 client_items: Sequence[object]) -> None:
        self.run = run
        self.session = session
        self.fmt = session.fmt.name
        self.client = Client(run.proxy.url)
        self.biller = SessionBiller(session.fmt, tokens, client_items)
        self.stability = Stability()

    def _error(self, where: str, line: str) -> None:
        self.run.errors += 1
        if len(self.run.error_examples) < 5:
            self.run.error_examples.append(f"{where}: {line}")

    def exchange(self, number: int, time: float, body: bytes, sent: dict[str, object],
                 upstream: RecordingUpstream) -> None:
        where = f"{self.session.name}#{number}"
        mark = upstream.mark()
        answer = self.client.send(self.fmt, body)
        records = upstream.since(mark)
        self.run.seconds.append(answer.seconds)
        forwarded = [r for r in records if r.fmt == self.fmt]
        self.run.extra_upstream_requests += len(records) - min(len(forwarded), 1)
        if answer.status != 200:
            self._error(where, f"HTTP {answer.status} {answer.error or answer.body[:200]!r}")
        elif not forwarded:
            self.run.answered_without_upstream += 1
        request = self._analyse(where, sent, forwarded[0], answer) if forwarded else None
        self.biller.add(request, time)

    def _analyse(self, where: str, sent: dict[str, object], received: Received,
                 answer: Answer) -> Request | None:
        try:
            document = orjson.loads(received.body)
        except orjson.JSONDecodeError:
            self._error(where, "the forwarded body is not JSON")
            return None
        member = LIST_MEMBERS[self.fmt]
        items = document.get(member) if isinstance(document, dict) else None
        if not isinstance(document, dict) or not isinstance(items, list):
            self._error(where, f"the forwarded body has no {member!r} list")
            return None
        found = request_changes(self.fmt, sent, document)
        if answer.status == 200:
            try:
                got: object = orjson.loads(answer.body)
            except orjson.JSONDecodeError:
                got = answer.body.decode("utf-8", "replace")
            changed = answer_changes(orjson.loads(received.answer), got)
            if changed is not None:
                found["answers"] = changed
        self.run.changes.add(found, where)
        self.stability.add(self.fmt, items)
        return Request({k: v for k, v in document.items() if k != member}, items)

    def finish(self) -> None:
        self.client.close()
        self.run.stability.add(self.stability)
        self.run.sessions.append(SessionFigures(self.session.name, self.fmt, self.biller.bill))


def _progress(message: str) -> None:
    print(f"bench_peers: {message}", file=sys.stderr, flush=True)


def _replay(session: Session, runs: list[ProxyRun], tokens: MessageTokens,
            upstream: RecordingUpstream) -> int:
    client = ClientRequests(session)
    replays = [_Replay(run, session, tokens, client.items) for run in runs]
    for number, (end, time) in enumerate(zip(session.request_ends, session.times,
                                             strict=True), start=1):
        sent = client.request(end)
        document = orjson.loads(sent.body)
        for replay in replays:
            replay.exchange(number, time, sent.body, document, upstream)
    for replay in replays:
        replay.finish()
    return len(session.request_ends)


def _start(name: str, upstream: str, work: Path, running: Running, version: str) -> Proxy:
    if name == NONE:
        return no_proxy(upstream)
    if name == OBSMASK:
        return start_obsmask(upstream, work, running, version)
    mode = next(mode for mode, proxy in HEADROOM_NAMES.items() if proxy == name)
    _progress(f"starting {name}")
    return start_headroom(mode, upstream, work, running)


def run_peers(options: RunOptions) -> PeersRun:
    sessions = load_sessions(options)
    tokens = MessageTokens(load_encoder())
    requests = 0
    with recording_upstream() as upstream, tempfile.TemporaryDirectory(
            prefix="obsmask-bench-peers-") as folder:
        running = Running()
        try:
            proxies = [_start(name, upstream.url, Path(folder), running,
                              options.obsmask_version) for name in options.proxies]
            runs = {proxy.name: ProxyRun(proxy) for proxy in proxies}
            active = [run for run in runs.values() if run.proxy.unavailable is None]
            for run in runs.values():
                if run.proxy.unavailable is not None:
                    _progress(f"{run.proxy.name} unavailable: {run.proxy.unavailable}")
            cpu_before = {run.proxy.name: cpu_seconds_once_idle(run.proxy.pid)
                          for run in active if run.proxy.pid is not None}
            for position, session in enumerate(sessions, start=1):
                _progress(f"session {position}/{len(sessions)} {session.name} "
                          f"({len(session.request_ends)} requests)")
                requests += _replay(session, active, tokens, upstream)
            for run in active:
                if run.proxy.pid is not None:
                    used = cpu_seconds_once_idle(run.proxy.pid) - cpu_before[run.proxy.name]
                    run.cpu_seconds = used
        finally:
            running.stop()
    return PeersRun(runs, [s.name for s in sessions], requests)
