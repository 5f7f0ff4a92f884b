#!/usr/bin/env python3
"""Offline benchmark of conversation masking: what it saves, what it costs.

    python3 scripts/bench_observation_masking_schema1.py --json --window-turns 1
    python3 scripts/bench_observation_masking_schema1.py --input my_flows.mitm

Replays a tool-heavy conversation with no network: by default the last request
of a real agent session (fixtures/sessions/chat/, 112 tool turns); with
--input, a request body (JSON, in any of the three wire formats) or a
mitmproxy flow file (.mitm: every POST to .../chat/completions, /v1/messages
or /v1/responses in it). For each request it masks with the given policy
and reports the tool results masked, the characters of tool results and the
input tokens before and after (cl100k_base, counted offline; OpenAI's
cookbook estimate of a chat request), the change in percent and the estimated
input cost. It also times the masking of each body against a plain
json.loads + json.dumps of the same body, the floor of any design that parses
and rewrites a request.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.errors import BenchError  # noqa: E402
from benchlib.one_request.inputs import read_request_bodies, repeat_history  # noqa: E402
from benchlib.one_request.measure import measure  # noqa: E402
from benchlib.one_request.report import ReportSettings, json_report, summary_text, totals  # noqa: E402
from obsmask_core.conversation.settings.policy import MaskPolicy  # noqa: E402
from obsmask_core.conversation.turns.wire_formats import FORMATS  # noqa: E402
from obsmask_core.shared.tokens import TokenCounter  # noqa: E402

DEFAULT_INPUT = REPO / "fixtures/sessions/chat/deepseek_chat_dev__sqlfluff__sqlfluff-1517.json"


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON (default: a summary)")
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT,
                        help="a request body (.json) or a flow file (.mitm)")
    defaults = MaskPolicy()
    parser.add_argument("--window-turns", type=int, default=defaults.window_turns)
    parser.add_argument("--keep-errors", action=argparse.BooleanOptionalAction,
                        default=defaults.keep_errors)
    parser.add_argument("--keep-last-k-per-tool", type=int, default=0)
    parser.add_argument("--placeholder-template", default=defaults.placeholder_template)
    parser.add_argument("--price-per-mtok", type=float, default=3.0,
                        help="input price in USD per million tokens (default 3.00)")
    parser.add_argument("--repeat", type=int, default=20, help="timing repetitions (median)")
    parser.add_argument("--format", choices=["auto", *FORMATS], default="auto",
                        help="wire format of the input (default: from its shape or route)")
    parser.add_argument("--repeat-history", type=int, default=1, metavar="N",
                        help="measure a synthetic body: each input's history repeated N times")
    return parser.parse_args()


def main() -> None:
    args = parse_arguments()
    policy = MaskPolicy(
        window_turns=args.window_turns,
        keep_errors=args.keep_errors,
        keep_last_k_per_tool=args.keep_last_k_per_tool or 0,
        placeholder_template=args.placeholder_template,
    )
    counter = TokenCounter()
    if not counter.wait_until_loaded(120):
        sys.exit(f"no tiktoken encoding could be loaded: {counter.failure}")

    source: Path = args.input
    bodies = read_request_bodies(source)
    if args.format != "auto":
        bodies = [(body, FORMATS[args.format]) for body, _ in bodies]
    if args.repeat_history > 1:
        bodies = [(repeat_history(body, fmt, args.repeat_history), fmt) for body, fmt in bodies]
    try:
        per_request = [measure(body, fmt, policy, counter, args.repeat) for body, fmt in bodies]
    except BenchError as e:
        sys.exit(str(e))
    sums = totals(per_request)
    if not sums.requests:
        sys.exit(f"{source}: no chat completion request obsmask could read")

    resolved = source.resolve()
    settings = ReportSettings(
        input_name=str(resolved.relative_to(REPO) if resolved.is_relative_to(REPO) else source),
        repeat_history=args.repeat_history,
        policy=policy,
        token_encoding=counter.encoding_name,
        price_per_mtok=args.price_per_mtok,
        repeat=args.repeat,
    )
    if args.json:
        print(json.dumps(json_report(settings, sums, per_request), indent=2))
    else:
        print(summary_text(settings, sums))


if __name__ == "__main__":
    main()
