#!/usr/bin/env python3
"""Where one client's chat request spends its time in obsmask's hooks.

    python3 scripts/bench_hooks.py                 # 100 KB, 201 next requests timed
    python3 scripts/bench_hooks.py --size "1.5 MB"
    python3 scripts/bench_hooks.py --quick         # 21 next requests

One mitmdump on 127.0.0.1, in reverse mode to the load benchmark's stub,
runs obsmask's addons with every hook timed
(``benchlib/hooks/timed_addons.py``; the shipped ``mitm.toml``). One client sends, one after
the other, pairs of an agent's requests of ``--size``
(``Mix.next_request_pair``: a conversation's request, then its next one,
with the model's answer and what followed added), as ``bench_load.py``'s
one-client rows do; the next one is what is reported.

Prints one JSON document: the median time the client waited for the next
request, and, for the next requests, the median of each hook (microseconds,
the most costly first; an async hook with what mitmproxy awaits of it), the
sum of those medians, and what goes on inside them: the masking time the
flow's summary records (``mask_ms``), and the pieces that are mitmproxy's,
which obsmask calls: ``flow.backup()`` (the copy of what the client sent)
and the handling of obsmask's log records (mitmproxy formats each and
prints it, and queues its ``add_log`` event while an addon has that hook;
summed per flow, and how many). A
flow's info lines are handled after its hooks, two turns of the loop
later (``flows.log_once_sent``): those are reported apart, the ones handled
since the previous flow's hooks ended (one client: about one flow's). The
first five pairs (``WARM_UP``) are left out of every median.

These are times inside mitmdump, between the requests of one client: its
caches have cooled meanwhile, so the same code takes longer than in a
tight loop (``bench_rewrite.py``). Plain mitmproxy's own time per request
is ``bench_load.py``'s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.hooks import (  # noqa: E402
    BACKUP,
    LATER_LOG_RECORD_COUNT,
    LATER_LOG_RECORDS,
    LOG_RECORD_COUNT,
    LOG_RECORDS,
    MASK,
    OUT_VARIABLE,
)
from benchlib.load.bodies import build_bodies  # noqa: E402
from benchlib.load.mix import AGENTS, Mix  # noqa: E402
from benchlib.load.stub import load_stub  # noqa: E402
from benchlib.mitmdump import MitmdumpProcess  # noqa: E402

TIMED_ADDONS = Path(__file__).resolve().parent / "benchlib" / "hooks" / "timed_addons.py"
SESSIONS = REPO / "fixtures" / "sessions"
SETTINGS = REPO / "mitm.toml"
PATH = "/v1/chat/completions?id=7&k="
# The first pairs warm the proxy up; they are not reported.
WARM_UP = 5


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="100 KB",
                        help="the chat body's size: 100 KB, 280 KB, 1.5 MB or 10 MB")
    parser.add_argument("--requests", type=int, default=201,
                        help="next requests timed (default 201)")
    parser.add_argument("--quick", action="store_true", help="21 next requests")
    args = parser.parse_args()
    if args.quick:
        args.requests = 21
    if args.requests < 1:
        parser.error("--requests must be at least 1")
    return args


def send(connection: http.client.HTTPConnection, body: bytes, kind: str) -> None:
    connection.request("POST", PATH + kind, body, {"content-type": "application/json"})
    answer = connection.getresponse()
    answer.read()
    if answer.status != 200:
        raise http.client.HTTPException(f"the proxy answered {answer.status} to a {kind} request")


def warm_median(values: list[float]) -> float:
    """The median of what came after the warm-up (of all, if nothing did)."""
    return statistics.median(values[WARM_UP:] or values)


def medians_us(samples: dict[str, list[float]]) -> dict[str, float]:
    """Each list's median in microseconds, the most costly first."""
    medians = {name: warm_median(values) * 1e6 for name, values in samples.items()}
    return {name: round(us, 1) for name, us in sorted(medians.items(), key=lambda kv: -kv[1])}


def main() -> None:
    args = parse_arguments()
    bodies = build_bodies(SESSIONS)
    if args.size not in bodies.chat_sized:
        raise SystemExit(f"bench_hooks: --size is one of {sorted(bodies.chat_sized)}")
    mix = Mix(bodies, cuts=True, mode=AGENTS)
    waited: list[float] = []
    with tempfile.TemporaryDirectory(prefix="obsmask-bench-hooks-") as folder, load_stub() as stub:
        work = Path(folder)
        times_file = work / "times.json"
        os.environ[OUT_VARIABLE] = str(times_file)  # mitmdump inherits it
        proxy = MitmdumpProcess(["--mode", f"reverse:{stub.url}",
                                 "--set", f"obsmask_config={SETTINGS}"],
                                work, work / "confdir", addon=TIMED_ADDONS)
        try:
            connection = http.client.HTTPConnection("127.0.0.1", proxy.wait_until_listening(),
                                                    timeout=60)
            for _ in range(WARM_UP + args.requests):
                first, next_body = mix.next_request_pair(args.size)
                send(connection, first, "first")
                started = time.perf_counter()
                send(connection, next_body, "next")
                waited.append(time.perf_counter() - started)
            connection.close()
        except (OSError, http.client.HTTPException) as e:
            raise SystemExit(f"bench_hooks: {e}; mitmdump's output:\n{proxy.tail()}") from None
        finally:
            proxy.stop()  # mitmproxy runs the addons' done: the times are written
        if not times_file.exists():
            raise SystemExit("bench_hooks: mitmdump wrote no times:\n" + proxy.tail())
        times: dict[str, dict[str, list[float]]] = json.loads(times_file.read_text())
    if "next" not in times:
        raise SystemExit("bench_hooks: no hook saw a next request")
    following = dict(times["next"])
    pieces = {name: following.pop(name, [0.0])
              for name in (BACKUP, LOG_RECORDS, LOG_RECORD_COUNT, LATER_LOG_RECORDS,
                           LATER_LOG_RECORD_COUNT, MASK)}
    hooks = medians_us(following)
    report = {
        "size": args.size,
        "requests": args.requests,
        "next_request_waited_ms": round(warm_median(waited) * 1000, 3),
        "hooks_us": hooks,
        "hooks_sum_us": round(sum(hooks.values()), 1),
        "inside_the_hooks_us": {
            **medians_us({name: pieces[name] for name in (MASK, BACKUP, LOG_RECORDS)}),
            "log records per flow": warm_median(pieces[LOG_RECORD_COUNT]),
        },
        "after_the_hooks_us": {
            **medians_us({"log records": pieces[LATER_LOG_RECORDS]}),
            "log records per flow": warm_median(pieces[LATER_LOG_RECORD_COUNT]),
        },
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
