#!/usr/bin/env python3
"""Load, fault and speed benchmark: plain mitmproxy against mitmproxy with obsmask.

    python3 scripts/bench_load.py            # the full run (a few minutes)
    python3 scripts/bench_load.py --quick    # a minute or so (the tests run it)

Two mitmdump processes, both up for the whole run, each in reverse mode to
a stub of its own (``benchlib.load.stub``) on 127.0.0.1: ``plain``
(mitmdump with ``benchlib/load/stream_sse.py`` only, which streams event
streams, as obsmask streams those of its routes: both stream) and
``obsmask`` (with the addon and the shipped settings, mitm.toml, plus the
MCP gateway naming the stub's routes). They take turns, so that the
machine's load falls on both: ``--rounds`` rounds (who goes first swapped
every round) of, for each proxy:

- load: ``--clients`` concurrent clients (threads), each sending
  ``--per-client`` requests on one kept-alive connection, taking in turn
  the kinds of the mix (``benchlib.load.mix``, each client beginning with
  another): the real agent sessions of
  fixtures/sessions/{chat,anthropic,responses}/ as Chat Completions
  requests (bodies of 20 KB to 1.5 MB, cut or grown from the sessions),
  Anthropic Messages and OpenAI Responses requests, some gzip-compressed,
  the Anthropic sessions again as Claude Code sends them
  (``benchlib.load.claude_code``: its twelve tool definitions, its
  reminders, its two marked system blocks and its moving breakpoint on the
  last block of every request), answered with JSON or event streams; MCP
  calls with a 1 KB and a 200,000-character answer, direct and through
  the gateway (plain mitmproxy sends the gateway's path on to the stub,
  which answers it as the direct route: the same requests through both);
  bad bodies (declared gzip and not, not JSON). The conversation bodies come as ``--bodies``
  says (``benchlib.load.mix``): by default each client carries on
  conversations of its own, each request the one before with the model's
  answer and what followed added, as agents send them
  (``benchlib.load.agents``); ``fresh``, every body one obsmask has not
  seen; ``repeated``, the sessions' bodies again and again (retries, for
  obsmask). Every answer compared byte for byte with what
  the stub sent (with obsmask, the 200,000 characters cut as the README
  says). The proxy's CPU time is read before and after (once it is idle);
- 1,000 requests on 10 kept-alive connections;
- faults, ``--fault-repeat`` times each, all at once: the upstream resets
  the connection mid-stream, the upstream stays silent and the client gives
  up after 1 s, the client leaves mid-upload and mid-stream, a client reads
  its answer one byte at a time (the gateway's cases too, for obsmask);
- then up to ``SETTLE_SECONDS`` for every connection to close: what is
  still open is counted from the stub's side (its open connections) and
  from mitmdump's (its TCP sockets in /proc/net/tcp, by state).

Then, ``--shape-rounds`` times, a load phase of each shape of
conversation traffic alone (``benchlib.load.shapes``: chat, anthropic,
responses, claude_code; its JSON and event-stream kinds, the same
clients, ``--shape-per-client`` requests each, carrying on their
conversations), the proxies taking turns: the CPU time per request and
the requests per second of one shape.

Then the speed phases (``benchlib.load.speed``), the proxies again taking
turns: ``--streams`` times each, an event stream of 200 events 10 ms apart
read while 2 clients send a 10 MB chat body (which obsmask masks) every
0.5 s each through the same proxy: its longest gap between two reads; and
one client alone, the median time of a request through each proxy in turn
for chat bodies of 100 KB, 280 KB, 1.5 MB and 10 MB and for the
200,000-character MCP answer (direct, and the gateway's route). Then
everything must close again.

Also counted: tracebacks and "internal error" lines in mitmdump's output
(read before it is stopped), and its resident memory (VmRSS) after the
first round and after the last; for obsmask also its garbage collections
by generation after those rounds (from its ``/obsmask/metrics``). Every
process is stopped by its handle; everything stays on 127.0.0.1.

Prints one JSON document on stdout: for each proxy what it came to
(requests, errors, wrong bodies, faults, connections left open, memory;
for obsmask its garbage collections), and ``speed``: for each proxy, over
the load phases, requests per second, its CPU time per request (user +
system of mitmdump, all its threads and its children, from
/proc/PID/stat, over the requests served), latency p50/p99 overall and
per kind (with the count of each), the gateway's p50 over the direct MCP
route's, the streams' longest gap; the ratios obsmask / plain; the no-load
medians and what obsmask adds to them; and ``targets``, issue 15's, each
with its value and whether it is met. ``speed.per_shape``: for each shape
its load phases' figures for both proxies, the ratios obsmask / plain and
issue 43's targets (CPU per request at most 2x plain's, requests per
second at least 0.5x: reported, never enforced), for each obsmask what
its own ``/obsmask/metrics`` account for of its CPU per request
(``cpu_ms_per_request_by_obsmask_metrics``: its request rewrites, its
garbage collections, in all and by generation, and the rest, mitmproxy's
and the other hooks'),
and ``reuse_replayed``:
the same traffic masked afterwards in this process (as many agents as the
phase has clients, one masker with the shipped settings), how many requests were masked and how
many of those made from the previous request's masked body
(``--no-reuse-replay``: not).

With ``--versus DIR`` (a checkout of obsmask: a git worktree of an
earlier commit, say), only the shape phases run, with a third proxy:
mitmdump with DIR's addon and this checkout's settings, taking turns with
the other two; ``per_shape`` then gives each proxy's figures and the
ratios of each obsmask to plain and of this one to DIR's (a change's
cost or gain under load, side by side in one run), ``versus_dir`` names
DIR, and ``plain``, ``obsmask`` and ``versus`` each proxy's errors.

Read the ratios: the machine's noise moves every figure, and the clients
and stubs run in this one Python process, which competes with mitmdump for
the cores (its CPU time is printed: near one core per second of load, the
requests per second say as much about it as about the proxy; the CPU time
per request is the proxy's alone). Under load every latency is mostly
queueing: about the number of clients over the requests per second.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.current_models import shape_models  # noqa: E402
from benchlib.load.bodies import Bodies, build_bodies  # noqa: E402
from benchlib.load.cases import (  # noqa: E402
    GATEWAY_SERVERS,
    Tally,
    keep_alive,
    run_faults,
    run_load,
    settle,
)
from benchlib.load.mix import AGENTS, BODY_MODES, MIX, SHAPE_KINDS, Mix, Request  # noqa: E402
from benchlib.load.procfs import cpu_seconds, cpu_seconds_once_idle, open_tcp, rss_kib  # noqa: E402
from benchlib.load.proxy_metrics import spent_by  # noqa: E402
from benchlib.load.shapes import replay_reuse, shape_report, versus_report  # noqa: E402
from benchlib.load.speed import (  # noqa: E402
    BIG_TAG,
    LoadFigures,
    Streams,
    no_load,
    speed_report,
    stream_under_load,
)
from benchlib.load.stub import LoadStub, load_stub  # noqa: E402
from benchlib.mitmdump import ADDON, MitmdumpProcess  # noqa: E402
from obsmask_core.offline.proxy_settings import settings_in_force  # noqa: E402

SESSIONS = REPO / "fixtures" / "sessions"
SETTINGS = REPO / "mitm.toml"
STREAM_SSE = Path(__file__).resolve().parent / "benchlib" / "load" / "stream_sse.py"
SETTLE_SECONDS = 10.0
KEEP_ALIVE_REQUESTS = 1000
KEEP_ALIVE_CONNECTIONS = 10
VARIANTS = ("plain", "obsmask")


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 rounds of 8 clients x 15 requests, faults twice, one stream, "
                             "15 requests per client in each shape's phase (a minute or so)")
    parser.add_argument("--clients", type=int, default=None, help="default 50 (8 with --quick)")
    parser.add_argument("--per-client", type=int, default=None,
                        help="requests per client and round (default 60, 15 with --quick)")
    parser.add_argument("--rounds", type=int, default=None, help="default 4 (2 with --quick)")
    parser.add_argument("--fault-repeat", type=int, default=None,
                        help="each fault case per round (default 5, 2 with --quick)")
    parser.add_argument("--bodies", choices=BODY_MODES, default=AGENTS,
                        help="how the conversation bodies come: each client carries on "
                             "conversations of its own as agents do (agents, the default); "
                             "every body one obsmask has not seen (fresh); or the sessions' "
                             "bodies again and again, which obsmask answers as retries "
                             "(repeated)")
    parser.add_argument("--streams", type=int, default=None,
                        help="streams read under 10 MB bodies, per proxy (default 3, 1 with "
                             "--quick)")
    parser.add_argument("--shape-rounds", type=int, default=1,
                        help="load phases of each shape of conversation traffic alone "
                             f"({', '.join(SHAPE_KINDS)}), per proxy (default 1; 0: none)")
    parser.add_argument("--shape-per-client", type=int, default=None,
                        help="requests per client in each shape's load phase (default 60, 15 "
                             "with --quick)")
    parser.add_argument("--recorded-models", action="store_true",
                        help="keep the sessions' own model ids (DeepSeek's, which the model "
                             "table does not know) instead of a current one per shape")
    parser.add_argument("--versus", type=Path, default=None, metavar="DIR",
                        help="a checkout of obsmask (a git worktree, say) whose addon runs as a "
                             "third proxy in the shape phases, which alone run then")
    parser.add_argument("--no-reuse-replay", action="store_true",
                        help="do not mask each shape's traffic in process afterwards to count "
                             "the requests made from the previous masked body")
    args = parser.parse_args()
    if args.shape_rounds < 0:
        parser.error("--shape-rounds must be at least 0")
    if args.versus is not None and not (args.versus / "addons" / "obsmask.py").is_file():
        parser.error(f"--versus: no addons/obsmask.py in {args.versus}")
    quick: bool = args.quick
    for name, full, short in (("clients", 50, 8), ("per_client", 60, 15), ("rounds", 4, 2),
                              ("fault_repeat", 5, 2), ("streams", 3, 1),
                              ("shape_per_client", 60, 15)):
        if getattr(args, name) is None:
            setattr(args, name, short if quick else full)
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def progress(message: str) -> None:
    print(f"bench_load: {message}", file=sys.stderr, flush=True)


def _merge(into: dict[str, Tally], tallies: dict[str, Tally]) -> None:
    for name, tally in tallies.items():
        total = into.setdefault(name, Tally())
        total.requests += tally.requests
        total.errors += tally.errors
        total.wrong_bodies += tally.wrong_bodies
        total.examples += tally.examples[: max(0, 5 - len(total.examples))]


def gc_collections(port: int) -> dict[str, int]:
    """The garbage collections so far of the mitmdump with obsmask on
    ``port``, per generation, from its ``/obsmask/metrics`` (a full one,
    generation 2, holds the event loop for its length); none if the route
    did not answer (its totals switched off, say)."""
    found = spent_by(port)
    if found is None:
        progress("obsmask: no garbage collection figures (/obsmask/metrics did not answer)")
        return {}
    return found.gc_collections


def _own_cpu_seconds() -> float:
    """The user + system CPU time of this process (clients and stubs)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Variant:
    """One mitmdump, its stub, and what its phases came to."""

    def __init__(self, name: str, stub: LoadStub, bodies: Bodies, work: Path,
                 args: argparse.Namespace, addon: Path | None = ADDON) -> None:
        """``addon``: obsmask's script (None: plain mitmproxy)."""
        self.name = name
        self.stub = stub
        self.gateway = addon is not None
        arguments = ["--mode", f"reverse:{stub.url}"]
        if self.gateway:
            arguments += ["--set", f"obsmask_config={SETTINGS}"]
            for server, path in GATEWAY_SERVERS.items():
                arguments += ["--set", f"mcpmask_gateway_servers={server}={stub.url}{path}"]
        self.proxy = MitmdumpProcess(arguments, work, work / f"confdir-{name}",
                                     addon=addon if addon is not None else STREAM_SSE)
        self.mix = Mix(bodies, cuts=self.gateway, mode=args.bodies, clients=args.clients,
                       per_client=args.per_client)
        self.port = 0
        self.load: dict[str, Tally] = {}
        self.faults: dict[str, Tally] = {}
        self.keep = Tally()
        self.speed = Tally()  # the requests of the speed phases
        self.figures = LoadFigures()
        # The load phases of one shape at a time: their figures, by shape,
        # and their requests, by kind.
        self.shapes: dict[str, LoadFigures] = {}
        self.shape_load: dict[str, Tally] = {}
        self.streams = Streams(big_body_bytes=len(bodies.chat_sized["10 MB"]))
        self.rss: list[int] = []
        self.gc: list[dict[str, int]] = []  # obsmask's, after each round
        self.left: list[dict[str, object]] = []
        self.left_after_speed: dict[str, object] = {}

    @property
    def pid(self) -> int:
        return self.proxy.process.pid

    def start(self) -> None:
        self.port = self.proxy.wait_until_listening()

    def run_round(self, number: int, args: argparse.Namespace) -> None:
        progress(f"{self.name}: round {number} of {args.rounds}")
        first = (number - 1) * args.clients * args.per_client
        cpu_before, own_before = cpu_seconds(self.pid), _own_cpu_seconds()
        started = time.perf_counter()
        tallies = run_load(self.port, self.mix.request, MIX, args.clients, args.per_client, first)
        seconds = time.perf_counter() - started
        own_after = _own_cpu_seconds()
        self.figures.add(tallies, seconds, cpu_seconds_once_idle(self.pid) - cpu_before,
                         own_after - own_before)
        _merge(self.load, tallies)
        _merge({"keep-alive": self.keep},
               {"keep-alive": keep_alive(self.port, KEEP_ALIVE_REQUESTS, KEEP_ALIVE_CONNECTIONS)})
        _merge(self.faults, run_faults(self.port, self.gateway, args.fault_repeat))
        if self.gateway:  # plain mitmproxy has no metrics; read before the settle,
            # which waits for this connection to close too
            self.gc.append(gc_collections(self.port))
        waited = self.settle()
        self.left.append({"round": number, "settle_s": round(waited, 1),
                          "stub_open": self.stub.open, "mitmdump_sockets": open_tcp(self.pid)})
        self.rss.append(rss_kib(self.pid))

    def run_shape(self, shape: str, first: int, args: argparse.Namespace) -> None:
        """One load phase of ``shape``'s kinds alone, its requests numbered
        from ``first``; client ``c`` carries on its own conversations."""
        progress(f"{self.name}: {shape} alone")
        kinds, per_client = list(SHAPE_KINDS[shape]), args.shape_per_client

        def request_for(n: int, turn: int) -> Request:
            return self.mix.request(n, turn, kinds, client=(n - first) // per_client)

        # obsmask's own account of its rewrites and collections, read
        # outside the CPU measured.
        spent_before = spent_by(self.port) if self.gateway else None
        cpu_before, own_before = cpu_seconds(self.pid), _own_cpu_seconds()
        started = time.perf_counter()
        tallies = run_load(self.port, request_for, kinds, args.clients, per_client, first)
        seconds = time.perf_counter() - started
        own_after = _own_cpu_seconds()
        cpu = cpu_seconds_once_idle(self.pid) - cpu_before
        spent = None
        if spent_before is not None and (spent_after := spent_by(self.port)) is not None:
            spent = spent_after.since(spent_before)
        self.shapes.setdefault(shape, LoadFigures()).add(
            tallies, seconds, cpu, own_after - own_before, spent)
        _merge(self.shape_load, tallies)

    def settle(self) -> float:
        return settle(lambda: self.stub.open + sum(open_tcp(self.pid).values()), SETTLE_SECONDS)

    def stream(self, n: int) -> None:
        progress(f"{self.name}: a stream under 10 MB bodies")
        self.streams.runs.append(stream_under_load(self.port, self.mix, n, self.speed))
        self.streams.upstream_bytes = self.stub.received.get(BIG_TAG, 0)

    def report(self) -> dict[str, object]:
        output = self.proxy.output()
        counted = [*self.load.values(), *self.faults.values(), self.keep, self.speed,
                   *self.shape_load.values()]
        return {
            "load": {kind: t.as_json() for kind, t in self.load.items()},
            "load_requests_per_s": (round(self.figures.requests / self.figures.seconds, 1)
                                    if self.figures.seconds else 0),
            "keep_alive": self.keep.as_json(),
            "shape_phases": {kind: t.as_json() for kind, t in self.shape_load.items()},
            "faults": {name: t.as_json() for name, t in self.faults.items()},
            "speed_phases": self.speed.as_json(),
            "errors": sum(t.errors for t in counted),
            "wrong_bodies": sum(t.wrong_bodies for t in counted),
            "tracebacks": output.count("Traceback"),
            "internal_errors": output.count("internal error"),
            "left_open_after_rounds": self.left,
            "left_open_after_speed": self.left_after_speed,
            "left_open": self.stub.open,
            "left_open_mitmdump": sum(open_tcp(self.pid).values()),
            "rss_kib_after_first_round": self.rss[0] if self.rss else 0,
            "rss_kib_after_last_round": self.rss[-1] if self.rss else 0,
            **({"gc_collections_after_first_round": self.gc[0],
                "gc_collections_after_last_round": self.gc[-1]} if self.gc else {}),
        }


def speed_phases(variants: dict[str, Variant], args: argparse.Namespace) -> dict[str, object]:
    """The streams under 10 MB bodies and the no-load medians, the proxies
    taking turns; then every connection must close again."""
    for repeat in range(args.streams):
        order = VARIANTS if repeat % 2 == 0 else VARIANTS[::-1]
        for name in order:
            variants[name].stream(900_000 + repeat)
    progress("one client, no load")
    budget, minimum, maximum = (0.5, 5, 15) if args.quick else (3.0, 11, 101)
    quiet, tallies = no_load({v: variants[v].port for v in VARIANTS},
                             {v: variants[v].mix for v in VARIANTS}, budget, minimum, maximum)
    for name, variant in variants.items():
        _merge({"speed": variant.speed}, {"speed": tallies[name]})
        waited = variant.settle()
        variant.left_after_speed = {"settle_s": round(waited, 1), "stub_open": variant.stub.open,
                                    "mitmdump_sockets": open_tcp(variant.pid)}
    return speed_report({v: variants[v].figures for v in VARIANTS},
                        {v: variants[v].streams for v in VARIANTS}, quiet, args.clients)


def shape_phases(variants: dict[str, Variant], args: argparse.Namespace) -> None:
    """Each shape's load phase, ``--shape-rounds`` times, the proxies taking
    turns (the order reversed every phase)."""
    phase, names = 0, list(variants)
    for _ in range(args.shape_rounds):
        for shape in SHAPE_KINDS:
            first = args.rounds * args.clients * args.per_client \
                + phase * args.clients * args.shape_per_client
            for name in names if phase % 2 == 0 else names[::-1]:
                variants[name].run_shape(shape, first, args)
            phase += 1


def started_variants(addons: dict[str, Path | None], bodies: Bodies, work: Path,
                     args: argparse.Namespace, stack: ExitStack) -> dict[str, Variant]:
    """A mitmdump listening for each of ``addons`` (None: plain mitmproxy),
    each before a stub of its own, stopped when ``stack`` closes."""
    variants: dict[str, Variant] = {}
    for name, addon in addons.items():
        stub = stack.enter_context(load_stub())
        variants[name] = Variant(name, stub, bodies, work, args, addon)
        stack.callback(variants[name].proxy.stop)
    for variant in variants.values():
        variant.start()
    return variants


def versus_run(args: argparse.Namespace, bodies: Bodies) -> dict[str, object]:
    """The shape phases alone, plain mitmproxy, obsmask and obsmask at
    ``--versus`` taking turns."""
    addons = {"plain": None, "obsmask": ADDON, "versus": args.versus / "addons" / "obsmask.py"}
    with tempfile.TemporaryDirectory(prefix="obsmask-bench-load-") as folder, ExitStack() as stack:
        variants = started_variants(addons, bodies, Path(folder), args, stack)
        shape_phases(variants, args)
        errors = {name: v.report() for name, v in variants.items()}
    return {
        "versus_dir": str(args.versus),
        "per_shape": versus_report({shape: {name: v.shapes[shape] for name, v in variants.items()}
                                    for shape in SHAPE_KINDS if args.shape_rounds}),
        **{name: {key: report[key] for key in ("errors", "wrong_bodies", "tracebacks",
                                                "internal_errors")}
           for name, report in errors.items()},
    }


def main() -> None:
    args = parse_arguments()
    started = time.perf_counter()
    models = shape_models(args.recorded_models)
    bodies = build_bodies(SESSIONS, models)
    report: dict[str, object] = {
        "quick": args.quick, "clients": args.clients, "per_client": args.per_client,
        "rounds": args.rounds, "fault_repeat": args.fault_repeat, "streams": args.streams,
        "keep_alive_requests": KEEP_ALIVE_REQUESTS, "mix": MIX,
        "bodies": args.bodies, "shape_rounds": args.shape_rounds,
        "shape_per_client": args.shape_per_client,
        "models": models,
        "sessions": bodies.sessions,
    }
    if args.versus is not None:
        report.update(versus_run(args, bodies))
        report["elapsed_s"] = round(time.perf_counter() - started, 1)
        print(json.dumps(report, indent=2))
        return
    with tempfile.TemporaryDirectory(prefix="obsmask-bench-load-") as folder, ExitStack() as stack:
        variants = started_variants({"plain": None, "obsmask": ADDON}, bodies, Path(folder), args,
                                    stack)
        for number in range(1, args.rounds + 1):
            for name in VARIANTS if number % 2 else VARIANTS[::-1]:
                variants[name].run_round(number, args)
        shape_phases(variants, args)
        speed = speed_phases(variants, args)
        for name in VARIANTS:
            report[name] = variants[name].report()
        report["speed"] = speed
    shapes = [shape for shape in SHAPE_KINDS if shape in variants["obsmask"].shapes]
    replayed = {}
    if shapes and not args.no_reuse_replay:
        progress("each shape's traffic masked in process")
        replayed = replay_reuse(bodies, args.bodies, shapes, args.clients,
                                args.shape_per_client,
                                settings_in_force([], config=str(SETTINGS)).policy)
    speed["per_shape"] = shape_report(
        {shape: {name: variants[name].shapes[shape] for name in VARIANTS} for shape in shapes},
        replayed)
    report["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
