#!/usr/bin/env python3
"""The request rewrite against its floor: masking a body against an orjson
round trip (loads, then dumps) of the same body.

    python3 scripts/bench_rewrite.py               # the ten real sessions, three formats
    python3 scripts/bench_rewrite.py --repeat 51 BODY.json...

For each body (by default the last request of each of the ten real sessions
in fixtures/sessions/, in all three wire formats, 30 bodies), masked with
the settings of ``--config`` (default: the shipped mitm.toml), the script
times, the actions taking turns so that the machine's load falls on all:

- ``mask_next_ms``: a masker's ``mask`` right after the conversation's
  previous request (the body cut before the model's last answer, byte for
  byte as the client wrote it) was masked: the frontier resumes from that
  request's checkpoint, the results it judged are not judged again, and
  when the plan makes the previous request's replacements its masked body
  is reused (``previous_requests``). An agent sends its history again with
  every request, so this is what a request of a session costs;
- ``mask_warm_ms``: the same body masked again (a retry): its own
  checkpoint and judgements are there;
- ``mask_cold_ms``: with every judgement and checkpoint forgotten first:
  the first request obsmask sees of a conversation;
- ``orjson_ms``: ``orjson.dumps(orjson.loads(body))``, the floor a rewrite
  that parses and writes the body cannot beat by much;
- ``json_ms``: the same with the standard library's ``json``.

``mask_over_orjson`` is the next request's time over orjson's, per body
and over all bodies (total time over total time). The issue's target is at
most 3. ``session_mask_over_orjson`` weighs every request of the session
instead of its last: the whole session replayed in order (each request
masked right after the one before, from nothing kept), its total masking
time over the total of an orjson round trip of the same bodies; the last
request is the largest, and the frontier moves on some requests and not on
others. Prints one JSON document on stdout. Medians of --repeat runs
(adaptive by default; the session replays: a tenth as many, at least one,
five by default).

With ``--off-loop``, it measures instead where a body is better masked on
a worker thread than on the event loop (``mitm/off_loop.py``): for Chat
bodies of 64 KB to 10 MB grown from a real session, each run a conversation
of its own (a first member numbered anew), the time masking takes inline
(all of it a stall of the loop) for a conversation's first request
(``first_inline_ms``: nothing kept, the worst case) and for its next one
(``next_inline_ms``: the request before it sent first, untimed); the time
to a first request's result through the worker thread (``thread_ms``;
``handover_ms`` is the difference), and the longest the loop stalls
meanwhile (``loop_gap_ms``: a task that does nothing but yield measures
the gaps between its turns). What the thread costs under load (its
hand-overs of the GIL) only ``scripts/bench_load.py`` shows.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

import orjson  # noqa: E402

from benchlib.load.bodies import chat_body  # noqa: E402
from benchlib.load.mix import numbered_body  # noqa: E402
from benchlib.timing import medians_ms, time_once  # noqa: E402
from obsmask_core.conversation.body.request_text import parse_request  # noqa: E402
from obsmask_core.conversation.masking.masker import Masker  # noqa: E402
from obsmask_core.conversation.settings.policy import MaskPolicy  # noqa: E402
from obsmask_core.conversation.turns.wire_formats import FORMATS, WireFormat  # noqa: E402
from obsmask_core.mitm.off_loop import OFF_LOOP_BYTES, OffLoop  # noqa: E402
from obsmask_core.offline.proxy_settings import settings_in_force  # noqa: E402
from obsmask_core.shared.json_text import skip_whitespace  # noqa: E402

SESSIONS = REPO / "fixtures" / "sessions"


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bodies", nargs="*", type=Path,
                        help="request bodies (format from the folder name: chat, anthropic, "
                             "responses; chat otherwise); default: the real sessions")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per action (default: as many as fit in 0.3 s, 7-201)")
    parser.add_argument("--config", type=Path, default=REPO / "mitm.toml",
                        help="the settings file whose policy masks (default: the shipped "
                             "mitm.toml)")
    parser.add_argument("--off-loop", action="store_true",
                        help="measure inline against the worker thread by body size instead")
    return parser.parse_args()


def bodies(paths: list[Path]) -> list[tuple[Path, WireFormat]]:
    if not paths:
        paths = sorted(SESSIONS.glob("*/*.json"))
    return [(path, FORMATS.get(path.parent.name, FORMATS["chat"])) for path in paths]


def session_requests(body: bytes, fmt: WireFormat) -> list[bytes]:
    """Every request of the conversation that ends with ``body``, in order:
    its items up to each answer of the model, then all of them; byte for
    byte as the client wrote them (an agent writes its history the same way
    every time)."""
    request = parse_request(body.decode("utf-8"), fmt.list_member)
    text = request.text
    close = skip_whitespace(text, request.item_spans[-1][1])
    cuts = [start for start in fmt.index(request.items).answer_starts if start > 0]
    return [(text[:request.item_spans[cut - 1][1]] + text[close:]).encode("utf-8")
            for cut in cuts] + [body]


def previous_request(body: bytes, fmt: WireFormat) -> bytes | None:
    """The conversation's request before ``body``: its items up to the
    model's last answer; None when it has no earlier answer."""
    request = parse_request(body.decode("utf-8"), fmt.list_member)
    cuts = [start for start in fmt.index(request.items).answer_starts if start > 0]
    if not cuts:
        return None
    text = request.text
    close = skip_whitespace(text, request.item_spans[-1][1])
    return (text[:request.item_spans[cuts[-1] - 1][1]] + text[close:]).encode("utf-8")


def _round_trip(body: bytes) -> bytes:
    return orjson.dumps(orjson.loads(body))


def session_ms(requests: list[bytes], fmt: WireFormat, masker: Masker,
               repeat: int) -> dict[str, float]:
    """The medians over ``repeat`` replays of the whole session, every
    request masked after the one before (judgements and checkpoints
    forgotten first), of the total time masking took, and of the total an
    orjson round trip of the same bodies took."""
    masked, floor = [], []
    for _ in range(repeat):
        masker.forget()
        mask_total = orjson_total = 0.0
        for request in requests:
            mask_total += time_once(functools.partial(masker.mask, request, fmt))
            orjson_total += time_once(functools.partial(_round_trip, request))
        masked.append(mask_total * 1000)
        floor.append(orjson_total * 1000)
    return {"session_mask_ms": statistics.median(masked),
            "session_orjson_ms": statistics.median(floor)}


def measure(body: bytes, fmt: WireFormat, policy: MaskPolicy,
            repeat: int | None) -> dict[str, object]:
    requests = session_requests(body, fmt)
    previous = requests[-2] if len(requests) > 1 else None
    masker = Masker(policy)
    session = session_ms(requests, fmt, masker, 5 if repeat is None else max(1, repeat // 10))
    outcome = masker.mask(body, fmt)
    next_runs: list[float] = []

    def cold() -> None:
        masker.forget()
        masker.mask(body, fmt)

    def after_previous() -> None:
        # Only the body is timed: the previous request is masked first,
        # with no checkpoint of this body's own left from the last run.
        masker.forget_requests()
        if previous is not None:
            masker.mask(previous, fmt)
        next_runs.append(time_once(lambda: masker.mask(body, fmt)) * 1000)

    times, runs = medians_ms({
        "mask_warm_ms": lambda: masker.mask(body, fmt),
        "mask_cold_ms": cold,
        "orjson_ms": lambda: orjson.dumps(orjson.loads(body)),
        "json_ms": lambda: json.dumps(json.loads(body)),
        "after_previous": after_previous,
    }, repeat, budget=0.3, minimum=7, maximum=201)
    del times["after_previous"]
    times = {"mask_next_ms": statistics.median(next_runs), **times}
    return {
        "bytes": len(body),
        "outcome": type(outcome).__name__,
        "runs": runs,
        **{name: round(value, 3) for name, value in times.items()},
        "mask_over_orjson": round(times["mask_next_ms"] / times["orjson_ms"], 2),
        "session_requests": len(requests),
        **{name: round(value, 2) for name, value in session.items()},
        "session_mask_over_orjson": round(session["session_mask_ms"]
                                          / session["session_orjson_ms"], 2),
    }


OFF_LOOP_SIZES = [64_000, 128_000, 256_000, 512_000, 1_000_000, 1_500_000, 10_000_000]


async def _through_thread(off_loop: OffLoop, work: Callable[[], object],
                          ) -> tuple[float, float]:
    """(ms to the result through the worker thread, the loop's longest gap)."""
    gaps = [0.0]
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    await off_loop.run(work)
    elapsed = time.perf_counter() - started
    done = True
    await task
    return elapsed * 1000, max(gaps) * 1000


def _off_loop_row(body: bytes, masker: Masker, fmt: WireFormat, repeat: int,
                  runs: Iterator[int]) -> dict[str, object]:
    before = previous_request(body, fmt)
    if before is None:
        raise ValueError("the session has no earlier answer, so no previous request")

    def first() -> Callable[[], object]:
        masker.forget()
        return functools.partial(masker.mask, numbered_body(body, next(runs)), fmt)

    def after_previous() -> Callable[[], object]:
        n = next(runs)
        masker.mask(numbered_body(before, n), fmt)
        return functools.partial(masker.mask, numbered_body(body, n), fmt)

    first_inline = statistics.median(time_once(first()) * 1000 for _ in range(repeat))
    next_inline = statistics.median(time_once(after_previous()) * 1000 for _ in range(repeat))
    off_loop = OffLoop()
    threaded = [asyncio.run(_through_thread(off_loop, first())) for _ in range(repeat)]
    thread = statistics.median(ms for ms, _ in threaded)
    print(f"bench_rewrite: {len(body):,} bytes: first {first_inline:.2f} ms, "
          f"next {next_inline:.2f} ms inline; first through the thread {thread:.2f} ms",
          file=sys.stderr, flush=True)
    return {
        "bytes": len(body), "first_inline_ms": round(first_inline, 3),
        "next_inline_ms": round(next_inline, 3), "thread_ms": round(thread, 3),
        "handover_ms": round(thread - first_inline, 3),
        "loop_gap_ms": round(statistics.median(gap for _, gap in threaded), 3),
    }


def off_loop_rows(repeat: int) -> dict[str, object]:
    session = max((SESSIONS / "chat").glob("*.json"), key=lambda p: p.stat().st_size)
    masker, fmt, runs = Masker(MaskPolicy()), FORMATS["chat"], itertools.count()
    rows = {str(size): _off_loop_row(chat_body(session.read_bytes(), size), masker, fmt,
                                     repeat, runs)
            for size in OFF_LOOP_SIZES}
    return {"off_loop_bytes_now": OFF_LOOP_BYTES, "sizes": rows}


def main() -> None:
    args = parse_arguments()
    if args.off_loop:
        print(json.dumps(off_loop_rows(args.repeat or 15), indent=2))
        return
    rows = {}
    policy = settings_in_force([], config=str(args.config)).policy
    for path, fmt in bodies(args.bodies):
        row = measure(path.read_bytes(), fmt, policy, args.repeat)
        rows[f"{fmt.name}/{path.name}"] = {"format": fmt.name, **row}
        print(f"bench_rewrite: {fmt.name}/{path.name}: {row['mask_over_orjson']}x",
              file=sys.stderr, flush=True)

    def total(key: str) -> float:
        return sum(float(str(row[key])) for row in rows.values())

    ratios = sorted(float(str(row["mask_over_orjson"])) for row in rows.values())
    print(json.dumps({
        "bodies": len(rows),
        "summary": {
            "policy_from": str(args.config),
            "session_mask_over_orjson": round(total("session_mask_ms")
                                              / total("session_orjson_ms"), 2),
            "mask_next_over_orjson": round(total("mask_next_ms") / total("orjson_ms"), 2),
            "mask_warm_over_orjson": round(total("mask_warm_ms") / total("orjson_ms"), 2),
            "mask_cold_over_orjson": round(total("mask_cold_ms") / total("orjson_ms"), 2),
            "mask_warm_over_json": round(total("mask_warm_ms") / total("json_ms"), 2),
            "worst_body_mask_over_orjson": ratios[-1] if ratios else None,
            "target_mask_over_orjson": 3,
        },
        "per_body": rows,
    }, indent=2))


if __name__ == "__main__":
    main()
