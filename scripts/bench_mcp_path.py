#!/usr/bin/env python3
"""Benchmark of the MCP path: what cutting one big answer costs, per transport.

    python3 scripts/bench_mcp_path.py
    python3 scripts/bench_mcp_path.py --chars 1000000 --repeat 50

An MCP answer whose text is ``--chars`` characters (200,000 by default: log
lines, a third of them with non-ASCII, compact JSON as MCP servers write it)
goes through the pure functions the MCP addon calls, with no proxy and no
network, on each transport:

- ``json``: an ``application/json`` answer, truncate_jsonrpc_body (decode,
  scan, cut, encode);
- ``sse``: the same message as one event of a buffered ``text/event-stream``
  answer, truncate_sse_body;
- ``sse_stream``: that event stream fed to SseTruncator in 16 KiB chunks, as
  the addon's stream tap does with a streamed answer;
- ``legacy_sse``: the legacy HTTP+SSE transport's GET stream (an
  ``endpoint`` event, then the message), which nothing says is MCP until its
  first event does, in 16 KiB chunks.

Each is timed beside the floor of any design that parses and writes the
message again, an orjson round trip of the same JSON
(``orjson.dumps(orjson.loads(body))``), the two taking turns; the figures
are medians in ms and their ratio. Token counting (what the addon does with
the cut text afterwards) is not part of it. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

import orjson  # noqa: E402

from benchlib.mcp_truncation.messages import dump, log_text, tool_result  # noqa: E402
from benchlib.timing import medians_ms  # noqa: E402
from obsmask_core.mcp.cut import Cut, truncate_jsonrpc_body  # noqa: E402
from obsmask_core.mcp.limits import TruncationLimits  # noqa: E402
from obsmask_core.mcp.scope import StreamDecision  # noqa: E402
from obsmask_core.mcp.sse_rewrite import SseTruncator, truncate_sse_body  # noqa: E402
from obsmask_core.shared.truncation import TruncationMarker  # noqa: E402

CHUNK = 16 << 10
ENDPOINT_EVENT = b"event: endpoint\ndata: /messages/?session_id=bench\n\n"


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=200_000,
                        help="characters of the answer's text (default 200000)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs of each (default: as many as fit in a second, "
                        "20 to 500)")
    args = parser.parse_args()
    if args.chars < 1:
        parser.error("--chars must be at least 1")
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def streamed(stream: bytes, limits: TruncationLimits, marker: TruncationMarker,
             legacy: bool) -> Callable[[], int]:
    """One run of SseTruncator over ``stream`` in CHUNK pieces, as the stream
    tap feeds it (``legacy``: a GET stream not yet known to be MCP); returns
    how many strings it cut."""
    def run() -> int:
        decision = StreamDecision() if legacy else None
        truncator = SseTruncator(limits, marker=marker, decision=decision)
        for start in range(0, len(stream), CHUNK):
            truncator.feed(stream[start : start + CHUNK])
        truncator.finish()
        return sum(len(cut.cuts) for cut in truncator.take_cuts())
    return run


def main() -> None:
    args = parse_arguments()
    limits = TruncationLimits()
    marker = TruncationMarker(limits.marker_template)
    body = dump(tool_result(7, log_text(args.chars))).encode("utf-8")
    event = b"event: message\ndata: " + body + b"\n\n"

    def json_cut() -> int:
        outcome = truncate_jsonrpc_body(body, limits, marker)
        return len(outcome.truncation.cuts) if isinstance(outcome, Cut) else 0

    def sse_cut() -> int:
        return sum(len(cut.cuts) for cut in truncate_sse_body(event, limits, marker).cuts)

    cuts: dict[str, Callable[[], int]] = {
        "json": json_cut,
        "sse": sse_cut,
        "sse_stream": streamed(event, limits, marker, legacy=False),
        "legacy_sse": streamed(ENDPOINT_EVENT + event, limits, marker, legacy=True),
    }
    transports: dict[str, object] = {}
    repeats: set[int] = set()
    for name, cut in cuts.items():
        figures, repeat = medians_ms(
            {"cut": cut, "round_trip": lambda: orjson.dumps(orjson.loads(body))},
            args.repeat, budget=1.0, minimum=20, maximum=500)
        repeats.add(repeat)
        transports[name] = {
            "cut_ms": round(figures["cut"], 3),
            "orjson_round_trip_ms": round(figures["round_trip"], 3),
            "ratio": round(figures["cut"] / figures["round_trip"], 2),
            "strings_cut": cut(),  # 1: the one long text, as it should be
        }
    print(json.dumps({
        "python": sys.version.split()[0],
        "orjson": orjson.__version__,
        "chars": args.chars,
        "body_bytes": len(body),
        "repeat": sorted(repeats),
        "transports": transports,
    }, indent=2))


if __name__ == "__main__":
    main()
