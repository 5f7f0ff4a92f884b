#!/usr/bin/env python3
"""What masking does to the bill once the provider's prompt cache is counted.

    python3 scripts/bench_cache.py                  # Markdown table for the README
    python3 scripts/bench_cache.py --json           # everything, as one JSON document
    python3 scripts/bench_cache.py --policy w4=window_turns=4 --policy w12=window_turns=12
    python3 scripts/bench_cache.py --input flows.mitm --synthetic 0 --no-adversarial
    python3 scripts/bench_cache.py --only-real --formats chat --per-session

Masking shortens every request, but it rewrites the history, and a
provider only serves from its cache what the request shares with what it
cached before. This replays sessions request by request, sends each
request through obsmask's own rewrite, and bills what obsmask forwards
under the providers' prompt caches as they work, for several policies in
the same run: the bill of each whole session, and the bill so far after
every request.

Sessions:

- real: the sessions of --sessions (default fixtures/sessions/, ten
  mini-swe-agent sessions in each of its chat/, anthropic/ and responses/
  folders: the same sessions in Chat Completions, Anthropic Messages and
  OpenAI Responses), for each format of --formats (default all three); a
  session is named ``<format>/<file stem>``. A folder without such
  subfolders is read as ``*.json`` bodies, each of the format its shape
  says. A file is the last request body of a session; each format is
  replayed with its own wire format: every prefix of its list
  (``messages``, ``input``) that ends just before an answer of the model is
  a request the agent sent (chat and anthropic: before each message with
  role "assistant"; responses: before the first item of each run of items
  the model produced, call items such as ``function_call``, ``reasoning``
  and messages with role "assistant"), and the whole body is the last one.
  The body's other members (model, tool definitions...) go with every
  request.
- synthetic (--synthetic N, default 10): Chat Completions, generated with
  fixed seeds (``random.Random(SYNTHETIC_SEED + n)`` for session n); their
  distribution is described in scripts/benchlib/cache/synthetic.py and in
  the JSON output ("synthetic_distribution").
- adversarial (default on; --no-adversarial): eight Chat Completions
  sessions of five families whose result sizes are chosen to make masking
  cost more than no masking at some point (200 tool turns of uniform 2,000,
  8,000 or 32,000-character results; a burst of eight 30,000-character
  results at the end or in the middle; 150 small results; tiny and huge
  results alternating; results that tokenise at about 8 and about 2
  characters per token alternating), fixed seeds; described in
  scripts/benchlib/cache/adversarial.py and in the JSON output
  ("adversarial_families"). Masking is a pure function of the request, so
  the first k tool turns of a uniform session are the k-turn session: its
  worst bill so far covers every length from 5 to 200 tool turns, and the
  output also gives the bill so far after k tool turns for k = 5, 10, 12,
  16, 20, 30, 50, 100 and 200.
- cache_edge (default on; --no-cache-edge): seven Anthropic Messages
  sessions at the edges of Anthropic's cache, fixed seeds: parallel tool
  calls that add more than 20 blocks in one turn (12 tool_use and 12
  tool_result blocks every 4th or every 2nd tool turn); prompts that stay
  near the 1,024 tokens Anthropic caches at least; a 6-minute pause (longer
  than the cache's lifetime) before every 5th or every 3rd request; and a
  client that already uses the four breakpoints (its last tool, the two
  system blocks, the last block). Described in
  scripts/benchlib/cache/cache_edges.py and in the JSON output
  ("cache_edge_families").
- --input FILE (repeatable): a request body, Chat Completions, Anthropic
  Messages or Responses (told by its members: a list ``input`` is
  Responses; ``messages`` with a top-level ``system`` or with
  ``tool_use``/``tool_result`` blocks is Anthropic, other ``messages``
  Chat Completions), replayed by its prefixes like a real session; or a
  mitmproxy flow file (.mitm): its POST bodies to ``.../chat/completions``,
  ``.../v1/messages`` and ``.../v1/responses`` (the route gives the
  format); a body whose list continues in a later body of the same format
  is one of that body's prefixes and is dropped, every other body is
  replayed by its prefixes like a JSON file (so a file holding two
  conversations gives two sessions; moved ``cache_control`` breakpoints do
  not split one). A flow that the proxy masked is read from its backup:
  the body as the client sent it. A flow file's conversations keep their
  list and what goes in front of it, not the other members.

One request every 20 seconds, unless a session says otherwise (the pauses).

How a request is sent and billed (scripts/benchlib/cache/replay.py): the
body is built as the client sends it, as JSON bytes
(scripts/benchlib/cache/clients.py): Anthropic Messages as Claude Code
sends them, ``system`` as two text blocks (a short first one and the
session's system text) with ``cache_control: {"type": "ephemeral"}`` on
both and on the last content block of the last message, the tools as the
session has them; Chat Completions and Responses as they are. It goes
through obsmask's ``mask_request_body(body, policy, fmt)``: a ``Masked``
outcome's body is forwarded, any other outcome forwards the client's body.
The forwarded bytes are parsed and cut into blocks in cache order
(scripts/benchlib/cache/prompts.py, tokens.py): each tool definition, the
system blocks, each item's content blocks (one for a string content); a
block's tokens are the cl100k_base tokens of its string values
(``cache_control`` left out, a plain text block read as its text), with
``TOKENS_PER_MESSAGE`` framing tokens on the first block of each item and
of the system, and 3 reply-priming tokens after the last block (never
cached). Its breakpoints are the blocks carrying ``cache_control``, and
the last block when the body has a top-level ``cache_control``.

Price models, per request, in units of the base input price
(scripts/benchlib/cache/model.py; each session and policy has caches of
its own):

- anthropic: Anthropic's cache as documented. A request reads the longest
  cache entry equal to one of its prefixes that ends at a block boundary
  at most 20 blocks before one of its breakpoints (for a breakpoint on
  block b: after blocks b, b-1, ..., b-19), content compared without
  ``cache_control``, for the same model; then writes an entry at each
  breakpoint whose prefix has at least 1,024 tokens. Read tokens cost 0.1;
  from the read boundary to the last breakpoint, writes at 1.25 (2.0 up to
  a breakpoint with ``"ttl": "1h"``); after it, 1.0. An entry lives 5
  minutes (1 hour with ttl "1h") after it was last written or read. A body
  with more than 4 breakpoints gets the API's 400: a protocol error,
  billed as plain input.
- openai_90 and openai_50: OpenAI's automatic prefix cache. A request
  reads the longest token prefix it shares with an earlier request of the
  session still alive (an hour after the last request that held it),
  nothing under 1,024 tokens, then rounded down to 1,024 + k * 128; reads
  at 0.1 or 0.5, every other token at 1.0.
- no_cache: every input token at 1.0.
- "anthropic_prefix" is shown in parentheses, no target: the former
  reading of Anthropic's cache, the longest common prefix with the previous
  request (all of it from 1,024 tokens) at 0.1 and every other token a
  write at 1.25, whatever the breakpoints and the time.

A Chat Completions or Responses body has no breakpoint: under "anthropic"
it caches nothing, and costs what it costs without a cache.

Protocol errors, per policy and session: forwarded bodies with more than 4
breakpoints, or where a breakpoint of the client's body is not on the same
block with the same ttl (moved or removed); obsmask may add one of its own
where a slot is free, never take one away. The outcomes of the rewrite
(masked, unchanged, refused, unreadable) are counted too.

Figures, per session, policy and price model: the final ratio, the
session's cost over that of "none" on the same session; and the bill so
far: after each request n, the cost of requests 1 to n over that of "none"
for the same requests, whose highest value over n >= 8
(FIRST_JUDGED_REQUEST; requests count from 1) is the session's worst bill
so far ("worst_prefix_ratio", and "worst_prefix_request" its n). Over the
sessions of a group (real, each format of the real sessions in the JSON,
synthetic, adversarial, cache_edge, input, all): mean and max of the final
ratios, the ratio of the summed costs ("total", JSON), and the max of the
worst bills so far with its session and request ("worst so far" in the
table).

Targets, with the recommended settings: (1) the worst bill so far over
every session of the run at most 1.03x under anthropic, openai_90 and
openai_50; (2) the mean final ratio of the real sessions (all formats) at
most 0.80x under anthropic and under openai_90; with the no_cache profile
(3) the mean final ratio over all the sessions of the run at most 0.70x
under no_cache; and (4) no protocol error in any policy. Each is printed
PASS or FAIL with the figure of each group inside it. The former target
"every session's final ratio at most 1.05x under every price model" is
printed too, for information.

Policies: "none" (masking off), "spec" (a plain sliding window: every tool
result older than the last 8 tool turns masked at every request, no
breakpoint of obsmask's own), "recommended" (what mitm.toml's
[observation_masking.schema1] gives the addon, read by the addon's own
loader; --config names another file), "recommended_no_frontier_breakpoint"
(the same with ``frontier_breakpoint = false``, once MaskPolicy has that
setting) and "no_cache_profile" (the same with its
[observation_masking.profiles.no_cache]); --policy adds or replaces one
(see scripts/benchlib/cache/policies.py).

Sessions are replayed side by side in --jobs worker processes (default: the
number of CPUs); the figures do not depend on it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.cache.report import json_report, markdown, per_session_markdown  # noqa: E402
from benchlib.cache.run import RunOptions, run_cache_benchmark  # noqa: E402
from benchlib.errors import BenchError  # noqa: E402
from obsmask_core.offline.cache.formats import FORMAT_NAMES  # noqa: E402

DEFAULT_SESSIONS = REPO / "fixtures/sessions"
DEFAULT_CONFIG = REPO / "mitm.toml"


def _formats(text: str) -> tuple[str, ...]:
    """``chat,anthropic`` -> the names, each a known wire format."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in FORMAT_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {', '.join(unknown)} (known: {', '.join(FORMAT_NAMES)})")
    return names


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--sessions", type=Path, default=DEFAULT_SESSIONS,
                        help="folder of real sessions: one subfolder per format (chat/, "
                             "anthropic/, responses/), or *.json request bodies")
    parser.add_argument("--formats", type=_formats, default=FORMAT_NAMES, metavar="F,F",
                        help="wire formats of the real sessions to replay "
                             f"(default {','.join(FORMAT_NAMES)})")
    parser.add_argument("--input", type=Path, action="append", default=[],
                        help="a request body (.json: chat, anthropic or responses) or a "
                             "flow file (.mitm); repeatable")
    parser.add_argument("--synthetic", type=int, default=10, metavar="N",
                        help="synthetic sessions (default 10)")
    parser.add_argument("--adversarial", action=argparse.BooleanOptionalAction, default=True,
                        help="the adversarial sessions (default: on)")
    parser.add_argument("--cache-edge", action=argparse.BooleanOptionalAction, default=True,
                        help="the sessions at the edges of Anthropic's cache (default: on)")
    parser.add_argument("--only-real", action="store_true",
                        help="no synthetic, adversarial or cache_edge sessions")
    parser.add_argument("--no-real", action="store_true", help="skip --sessions")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG,
                        help="the settings file of the recommended and no_cache policies")
    parser.add_argument("--policy", action="append", default=[], metavar="NAME=k=v,k=v",
                        help="add (or replace) a policy, values in TOML: "
                             "w4=window_turns=4,keep_errors=false; repeatable")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="worker processes replaying sessions side by side "
                             "(default: the number of CPUs; the figures do not depend on it)")
    parser.add_argument("--per-session", action="store_true",
                        help="also print every session's final ratios and worst bill so far "
                             "(Markdown)")
    return parser.parse_args()


def main() -> None:
    args = parse_arguments()
    started = time.perf_counter()
    options = RunOptions(
        config=args.config,
        sessions_folder=args.sessions,
        real=not args.no_real,
        formats=args.formats,
        synthetic=0 if args.only_real else args.synthetic,
        adversarial=args.adversarial and not args.only_real,
        cache_edge=args.cache_edge and not args.only_real,
        jobs=args.jobs,
        inputs=args.input,
        policy_options=args.policy,
    )
    try:
        run = run_cache_benchmark(options)
    except BenchError as e:
        sys.exit(str(e))
    elapsed = time.perf_counter() - started
    if args.json:
        print(json.dumps(json_report(run, elapsed), indent=2, ensure_ascii=False))
    else:
        print(markdown(run))
        if args.per_session:
            print()
            print(per_session_markdown(run))
    print(f"bench_cache: {len(run.sessions)} sessions, {run.requests} requests, "
          f"{len(run.policies)} policies in {elapsed:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
