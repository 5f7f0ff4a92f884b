#!/usr/bin/env python3
"""One self-contained HTML page with pictures of what obsmask did.

    python3 scripts/report.py FLOWS.mitm [more.mitm ...] [-o report.html]
    python3 scripts/report.py flows.mitm --config mitm.toml --set obsmask_window_turns=2

The flow files are read with mitmproxy (record them with ``mitmdump -w``, or
save them from mitmweb). The requests on the Chat Completions, Messages and
Responses routes are grouped by conversation (the hash of the first user
message obsmask records, or computes here for flows recorded without it);
for each conversation the page shows the input tokens of every request with
and without masking and the cached share the provider reported, the moves of
the masking frontier, and the bill so far under each price model (anthropic,
openai, openai_50, none) with and without masking, and the re-fetches the
flows recorded (calls the model made again once masking took their result)
with what they cost; then the MCP answers obsmask cut, and totals at the
top. Every plot has the table of its numbers beside it.

The bill replays each conversation's original requests (a masked flow's
original is its backup) with bench_cache's code, under the settings the
proxy would use: the built-in defaults, the settings file (--config, else
mitm.toml in the current directory when there is one), then --set
obsmask_<key>=VALUE options. Without --config and a --set of the masking
policy (its settings, the master switch, the profile; a route's --set is
none), the values the flows recorded (window_turns, price_model,
allowance_percent) go over the file's, so the replay follows what the proxy
did; the page says which. A conversation in the holdout group
(holdout_percent) is replayed unmasked, as the proxy leaves it, and named
as held out; a flow obsmask masked whose backup is missing or cannot be
read is skipped, and the page says so.

The page holds its style and its plots (inline SVG): no script, font or
picture to fetch; it opens offline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.errors import BenchError  # noqa: E402
from benchlib.report.policy_choice import UserSettings  # noqa: E402
from benchlib.report.run import build_report  # noqa: E402


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("flows", type=Path, nargs="+", metavar="FLOWS.mitm",
                        help="mitmproxy flow files, read in this order")
    parser.add_argument("-o", "--output", type=Path, default=Path("report.html"),
                        help="the page to write (default: report.html)")
    parser.add_argument("--config", default=None, metavar="PATH",
                        help="obsmask's settings file (default: mitm.toml in the current "
                             "directory when there is one)")
    parser.add_argument("--set", dest="assignments", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="an obsmask option, as for the proxy: "
                             "--set obsmask_window_turns=2; repeatable")
    return parser.parse_args()


def main() -> None:
    args = parse_arguments()
    settings = UserSettings(args.config, tuple(args.assignments))
    try:  # a setting the proxy would refuse stops the report here too
        page, conversations, requests = build_report(args.flows, settings)
    except BenchError as e:
        sys.exit(f"report: {e}")
    args.output.write_text(page, encoding="utf-8")
    print(f"report: wrote {args.output} ({conversations} conversation(s), "
          f"{requests} request(s))", file=sys.stderr)


if __name__ == "__main__":
    main()
