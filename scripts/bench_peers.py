#!/usr/bin/env python3
"""obsmask and the proxy people pick instead, measured side by side.

    python3 scripts/bench_peers.py --install       # Headroom's own venv, once (PyPI)
    python3 scripts/bench_peers.py                 # JSON on stdout, tables on stderr
    python3 scripts/bench_peers.py --table         # the tables on stdout
    python3 scripts/bench_peers.py --quick         # one short session: the test's run

The shared sessions (fixtures/sessions/, in Chat Completions, Anthropic
Messages and OpenAI Responses; Anthropic's sent as Claude Code sends them,
with its three breakpoints: scripts/benchlib/cache/clients.py) are sent
request by request, each request as the client recorded it (the whole
history again), through:

- none: straight to the upstream (the reference);
- obsmask: a real mitmdump with the addon and the shipped settings
  (mitm.toml), in reverse mode;
- headroom_cache and headroom_token: Headroom (headroom-ai, pinned in
  scripts/benchlib/peers/headroom.py) in its two modes, offline, from its own
  venv; reported as unavailable, with the reason, when it is not installed
  or does not start (no figure is made up for it).

All of them forward to one recording upstream on 127.0.0.1 that answers each
format and keeps every body it receives. The same request goes through each
proxy in turn before the next one. The forwarded bodies are billed under
bench_cache's cache models (scripts/benchlib/cache/model.py), at the
session's pace (one request every 20 s), and compared with what the client
sent; see scripts/benchlib/peers/report.py for every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.errors import BenchError  # noqa: E402
from benchlib.peers import headroom  # noqa: E402
from benchlib.peers.proxies import PROXY_NAMES  # noqa: E402
from benchlib.peers.report import json_report, markdown  # noqa: E402
from benchlib.peers.run import RunOptions, run_peers  # noqa: E402
from obsmask_core.offline.cache.formats import FORMAT_NAMES  # noqa: E402

DEFAULT_SESSIONS = REPO / "fixtures/sessions"


def _names(text: str, known: tuple[str, ...]) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--install", action="store_true",
                        help=f"create {headroom.VENV.relative_to(REPO)} with "
                             f"{' '.join(headroom.REQUIREMENTS)} from PyPI, then exit")
    parser.add_argument("--quick", action="store_true",
                        help="one short session in each format, a few requests")
    parser.add_argument("--table", action="store_true",
                        help="print the tables on stdout instead of the JSON")
    parser.add_argument("--sessions", type=Path, default=DEFAULT_SESSIONS,
                        help="folder of sessions, one subfolder per format")
    parser.add_argument("--formats", type=lambda t: _names(t, FORMAT_NAMES),
                        default=FORMAT_NAMES, metavar="F,F")
    parser.add_argument("--proxies", type=lambda t: _names(t, PROXY_NAMES),
                        default=PROXY_NAMES, metavar="P,P",
                        help=f"proxies to run (default all: {','.join(PROXY_NAMES)}); "
                             "none is always run, as the reference")
    parser.add_argument("--only", action="append", default=[], metavar="STEM",
                        help="only the session of this file stem; repeatable")
    parser.add_argument("--max-requests", type=int, default=None, metavar="N",
                        help="the first N requests of each session")
    return parser.parse_args()


def _git(*arguments: str) -> str:
    result = subprocess.run(["git", *arguments], cwd=REPO, capture_output=True, text=True,
                            timeout=30, check=False)
    return result.stdout.strip()


def obsmask_version() -> str:
    """The commit, marked dirty when the addon or its settings differ from it."""
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--", "addons", "mitm.toml")
    return f"{commit}{' (uncommitted changes in addons/ or mitm.toml)' if dirty else ''}"


def context(quick: bool) -> dict[str, object]:
    import mitmproxy.version

    return {
        "quick": quick,
        "versions": {"obsmask": obsmask_version(), "mitmproxy": mitmproxy.version.VERSION,
                     "headroom": headroom.VERSION, "python": platform.python_version()},
        "machine": {"cpus": os.cpu_count(), "processor": _cpu_model(),
                    "system": platform.platform()},
        "headroom_offline": {"settings": headroom.command("MODE", 0, "UPSTREAM")[3:],
                             "cannot_run_offline": list(headroom.OFFLINE_LIMITS)},
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> None:
    args = parse_arguments()
    if args.install:
        headroom.install()
        print(f"bench_peers: {headroom.REQUIREMENTS[0]} is in "
              f"{headroom.VENV.relative_to(REPO)}", file=sys.stderr)
        return
    proxies = ("none", *(name for name in args.proxies if name != "none"))
    options = RunOptions(args.sessions, args.formats, proxies, quick=args.quick,
                         max_requests=args.max_requests, only=tuple(args.only),
                         obsmask_version=obsmask_version())
    started = time.perf_counter()
    try:
        run = run_peers(options)
    except BenchError as e:
        sys.exit(f"bench_peers: {e}")
    run.seconds = time.perf_counter() - started
    report = json_report(run, context(args.quick))
    tables = markdown(report)
    if args.table:
        print(tables)
    else:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        print(tables, file=sys.stderr)
    print(f"bench_peers: {len(run.sessions)} sessions, {run.requests} requests per proxy "
          f"in {run.seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
