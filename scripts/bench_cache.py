#!/usr/bin/env python3
"""What masking does to the bill once the provider's prompt cache is counted.

    python3 scripts/bench_cache.py                  # Markdown table for the README
    python3 scripts/bench_cache.py --json           # everything, as one JSON document
    python3 scripts/bench_cache.py --policy w4=window_turns=4 --policy w12=window_turns=12
    python3 scripts/bench_cache.py --input flows.mitm --synthetic 0 --no-adversarial
    python3 scripts/bench_cache.py --only-real --formats chat --per-session
    python3 scripts/bench_cache.py --quick --families sonnet,gpt_5   # a minute or two

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
- claude_code (default: one per real Anthropic session; --claude-code N):
  the real Anthropic sessions as Claude Code sends them to Opus 4.8 and
  the 5.x models: its twelve tool definitions (about 48 kB), its reminders
  as messages of their own (``{"role": "system", "content": [{"type":
  "text", "text": "<system-reminder>...</system-reminder>"}]}``) after the
  results of every 3rd tool turn, which carry the moving breakpoint when
  they end a request; scripts/benchlib/cache/claude_code.py.
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

- pauses (default on, --quick too; --no-pauses; off with --only-real
  unless --pauses): copies of the real sessions of the run (every format)
  and of their Claude Code-shaped copies, one per pause family, whose
  gaps between requests are drawn from a stated distribution and replayed
  with that virtual clock (obsmask's table of when conversations were
  last seen is visited at each request's time, the caches expire entries
  by it). A gap is long with probability 0.27 ("pauses-27pct": Claude Code
  users report that 27% of replies come after the 5-minute cache lifetime,
  anthropics/claude-code#74075) or 0.034 ("pauses-3pct": a hosted
  cache-safe masking service, context-guru, measured cold turns as 3.4% of
  requests), else uniform in 5-60 s; a long gap is uniform in 6-55 minutes
  (3 in 4) or 61-180 minutes (1 in 4, our assumption); seeded per copy.
  They are replayed under "none", "recommended" and
  "recommended_no_cold_turns" (the same with ``cold_turns = false``), apart
  from the other sessions: the JSON's "pauses" has their figures, targets
  and distribution. Described in scripts/benchlib/cache/pauses.py.

One request every 20 seconds, unless a session says otherwise (cache_edge's
pauses, the pause families).

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
(offline/cache/prompts.py, block_tokens.py): each tool definition, the
system blocks, each item's content blocks (one for a string content); a
block's tokens are the cl100k_base tokens of its string values
(``cache_control`` left out, a plain text block read as its text), with
``TOKENS_PER_MESSAGE`` framing tokens on the first block of each item and
of the system, and 3 reply-priming tokens after the last block (never
cached). Its breakpoints are the blocks carrying ``cache_control``, and
the last block when the body has a top-level ``cache_control``.

Model families (addons/obsmask_core/offline/cache/families.py): every
session is replayed under each family of its wire format. Each request
carries the family's model id in its ``model`` member before it goes
through obsmask (the shipped ``price_model = "auto"`` prices it by that
model's row of obsmask's table), and what obsmask forwards is billed under
the family's own prices and cache rule, written from the providers' pages
(the JSON's "families_table" says whether obsmask's table agrees), in
units of the base input price:

- Anthropic Messages sessions (real, Claude Code-shaped, cache_edge):
  Sonnet-class ("sonnet", model claude-sonnet-4-5: reads 0.1, writes 1.25,
  1-hour writes 2.0, nothing under 1,024 tokens), Opus 5.5 ("opus_5_5",
  claude-opus-5-5: 0.05, 1.25, 512) and Fable 5.1 ("fable_5_1",
  claude-fable-5-1: 0.025, 1.25, 512), under Anthropic's cache as
  documented: a request reads the longest live cache entry equal to one
  of its prefixes that ends at a block boundary a breakpoint looks back to
  (content compared without ``cache_control``, for the same model), then
  writes an entry at each breakpoint whose prefix reaches the family's
  minimum; read tokens at the read price, from the read boundary to the
  last breakpoint at the write price (the 1-hour one up to a breakpoint
  with ``"ttl": "1h"``), after it 1.0; an entry lives 5 minutes (1 hour
  with ttl "1h") after it was last written or read; more than 4
  breakpoints is the API's 400, a protocol error, billed as plain input.
  "Up to approximately 20 blocks" is read both ways, each a line of the
  output: "strict" (for a breakpoint on block b the boundaries after
  blocks b, b-1, ..., b-19) and "lenient" (down to b-20): "sonnet/strict",
  "sonnet/lenient"...
- Chat Completions and Responses sessions (real, synthetic, adversarial):
  OpenAI 0.1 before GPT-5.6 ("gpt_5", model gpt-5: the longest token
  prefix shared with a live earlier request of the session, an hour after
  the last request that held it, nothing under 1,024 tokens, then rounded
  down to 1,024 + k * 128; reads 0.1, writes free), OpenAI 0.5 ("gpt_4o",
  gpt-4o: the same at 0.5), GPT-5.6 ("gpt_5_6", gpt-5.6: the whole shared
  prefix from 1,024 tokens, no steps; reads 0.1, every token not read a
  write at 1.25) and no cache ("no_cache", the session's own model: every
  input token at 1.0).

Runs that forward the same bodies are replayed once and billed under each
family they serve (a policy whose price_model has no cache never reads the
model; one that does reads only its row's terms; frontier_breakpoint does
nothing outside Anthropic Messages): see offline/cache/family_replay.py.

Protocol errors, per policy and session: forwarded bodies with more than 4
breakpoints, or where a breakpoint of the client's body is not on the same
block with the same ttl (moved or removed); obsmask may add one of its own
where a slot is free, never take one away. The outcomes of the rewrite
(masked, unchanged, refused, unreadable) are counted too, per family.

Figures, per session, line (family and reading) and policy: the final
ratio, the session's cost over that of "none" on the same session and
line; and the bill so far: after each request n, the cost of requests 1 to
n over that of "none" for the same requests, whose highest value over n >=
8 (FIRST_JUDGED_REQUEST; requests count from 1) is the session's worst
bill so far ("worst_prefix_ratio", and "worst_prefix_request" its n). Over
the sessions of a group (real, each format of the real sessions in the
JSON, claude_code, synthetic, adversarial, cache_edge, input, all): mean
and max of the final ratios, the ratio of the summed costs ("total",
JSON), the max of the worst bills so far with its session and request
("worst so far" in the table), and the sessions whose bill so far passes
1.03x ("over_1_03_sessions"). The JSON's "families" gives, per line, the
shipped settings' mean, worst bill so far and sessions over 1.03x.

Targets, with the recommended settings: (1) the worst bill so far over
every session of the run at most 1.03x under every line with a cache
(every family, both readings); (2) the mean final ratio of the real
sessions at most 0.80x under the lines that read at 0.1x (sonnet/strict,
sonnet/lenient, gpt_5); with the no_cache profile (3) the mean final ratio
at most 0.70x under no_cache; and (4) no protocol error in any policy.
On the pause families, with the recommended settings: (5) the worst bill
so far at most 1.03x in every paused session under every line with a
cache; (6) under Fable 5.1 (reads at 0.025x, both readings) the mean final
ratio with cold turns at least 0.05 below the mean without them (the same
under the other lines for information). Per line and pause family the
output gives both means, their difference, the share of the saving that
comes from cold turns ((cost without cold turns - cost with them) / (cost
without masking - cost with them), summed over the sessions) and the
worst bill so far. Each is printed PASS or FAIL with the figure of each
group inside it. The
other families' means (Opus 5.5, Fable 5.1, GPT-4o, GPT-5.6) and "every
session's final ratio at most 1.05x" are printed too, for information.

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
number of CPUs); the figures do not depend on it. --families keeps some
families (and the sessions they bill, the paused copies too); --quick
replays the 2 shortest real sessions of each format, 1 Claude Code-shaped
and 2 synthetic ones, and the paused copies of the real and Claude
Code-shaped ones.
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
from obsmask_core.offline.cache.families import FAMILY_NAMES, choose_families  # noqa: E402
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


def _families(text: str) -> tuple[str, ...]:
    """``sonnet,gpt_5`` -> the names, each a known family."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    try:
        choose_families(names)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
    return names


# --quick: a few sessions of each kind, for a check in a minute.
QUICK_REAL_PER_FORMAT = 2
QUICK_CLAUDE_CODE = 1
QUICK_SYNTHETIC = 2


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
    parser.add_argument("--synthetic", type=int, default=None, metavar="N",
                        help="synthetic sessions (default 10)")
    parser.add_argument("--adversarial", action=argparse.BooleanOptionalAction, default=None,
                        help="the adversarial sessions (default: on)")
    parser.add_argument("--cache-edge", action=argparse.BooleanOptionalAction, default=None,
                        help="the sessions at the edges of Anthropic's cache (default: on)")
    parser.add_argument("--pauses", action=argparse.BooleanOptionalAction, default=None,
                        help="the pause families: the real and Claude Code-shaped sessions "
                             "with long gaps, with and without cold turns (default: on, "
                             "--quick too; off with --only-real unless asked for)")
    parser.add_argument("--claude-code", type=int, default=None, metavar="N",
                        help="Claude Code-shaped copies of the first N real Anthropic "
                             "sessions (default: all; 0: none)")
    parser.add_argument("--families", type=_families, default=(), metavar="F,F",
                        help="model families to replay under (default: all: "
                             f"{','.join(FAMILY_NAMES)})")
    parser.add_argument("--quick", action="store_true",
                        help=f"the {QUICK_REAL_PER_FORMAT} shortest real sessions of each "
                             f"format, {QUICK_CLAUDE_CODE} Claude Code-shaped one, "
                             f"{QUICK_SYNTHETIC} synthetic, no adversarial or cache_edge "
                             "(unless asked for by name); the pause families of those")
    parser.add_argument("--only-real", action="store_true",
                        help="no synthetic, adversarial, cache_edge, Claude Code-shaped or "
                             "pause sessions (but --pauses)")
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
    quick = args.quick
    synthetic = args.synthetic if args.synthetic is not None else (
        QUICK_SYNTHETIC if quick else 10)
    claude_code = args.claude_code if args.claude_code is not None else (
        QUICK_CLAUDE_CODE if quick else None)
    options = RunOptions(
        config=args.config,
        sessions_folder=args.sessions,
        real=not args.no_real,
        formats=args.formats,
        synthetic=0 if args.only_real else synthetic,
        adversarial=bool(args.adversarial if args.adversarial is not None else not quick)
        and not args.only_real,
        cache_edge=bool(args.cache_edge if args.cache_edge is not None else not quick)
        and not args.only_real,
        claude_code=0 if args.only_real else claude_code,
        families=choose_families(args.families),
        real_limit=QUICK_REAL_PER_FORMAT if quick else None,
        jobs=args.jobs,
        inputs=args.input,
        policy_options=args.policy,
        pauses=args.pauses if args.pauses is not None else not args.only_real,
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
    paused = (f" (and {len(run.pauses.sessions)} paused sessions, {run.pauses.requests} "
              f"requests, {len(run.pauses.policies)} policies)" if run.pauses else "")
    print(f"bench_cache: {len(run.sessions)} sessions, {run.requests} requests, "
          f"{len(run.policies)} policies{paused}, {len(run.families)} families in "
          f"{elapsed:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
