#!/usr/bin/env python3
"""Re-fetches on the shared sessions, and what the guard costs. Prints JSON.

    python3 scripts/bench_refetch.py [--jobs N] [--config mitm.toml]

The shared sessions (fixtures/sessions, all three wire formats; Anthropic
ones with Claude Code's breakpoints) were recorded without masking, so
every repeat in them is a natural one: the baseline. Per session and in
total:

- calls, and repeats (a call with the same tool and arguments as an earlier
  one), split as the detection reads them: after a call that may have
  changed something, or with nothing changed in between;
- detections with the recommended settings (mitm.toml): the repeats the
  proxy would read as re-fetches, every one a natural repeat here (the
  detection's false alarms), with the guard off and on, and the results
  the guard keeps;
- the bill, replayed as bench_cache replays it (the same cache models),
  with the recommended settings and the same with ``refetch_guard`` flipped:
  the mean final ratio to no masking and the worst bill so far from the
  8th request, per price model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.cache.parallel import all_figures  # noqa: E402
from benchlib.cache.policies import BASELINE, compared_policies  # noqa: E402
from benchlib.refetch.counts import added_up, session_counts  # noqa: E402
from obsmask_core.conversation.settings.policy import MaskPolicy  # noqa: E402
from obsmask_core.offline.cache.billing import BENCHMARK_NAMES  # noqa: E402
from obsmask_core.offline.cache.block_tokens import MessageTokens, load_encoder  # noqa: E402
from obsmask_core.offline.cache.sessions import Session, load_real_sessions  # noqa: E402

SESSIONS = REPO / "fixtures/sessions"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--config", type=Path, default=REPO / "mitm.toml")
    parser.add_argument("--sessions", type=Path, default=SESSIONS)
    parser.add_argument("--no-bill", action="store_true", help="counts only, no replay")
    args = parser.parse_args()
    started = time.monotonic()
    recommended = compared_policies(args.config)["recommended"].policy
    sessions = load_real_sessions(args.sessions)
    counts = [session_counts(session, recommended) for session in sessions]
    total = added_up(counts)
    report: dict[str, object] = {
        "settings": str(args.config.relative_to(REPO) if args.config.is_relative_to(REPO)
                        else args.config),
        "recommended_refetch_guard": recommended.refetch_guard,
        "sessions": len(sessions),
        "total": total,
        "per_session": counts,
    }
    if not args.no_bill:
        report["bill"] = _bills(sessions, recommended, args.jobs)
    report["seconds"] = round(time.monotonic() - started, 1)
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


def _bills(sessions: list[Session], recommended: MaskPolicy, jobs: int) -> dict[str, object]:
    policies = {BASELINE: MaskPolicy(enabled=False),
                "guard_off": replace(recommended, refetch_guard=False),
                "guard_on": replace(recommended, refetch_guard=True)}
    figures = all_figures(sessions, policies, MessageTokens(load_encoder()), jobs)
    out: dict[str, object] = {}
    for name in ("guard_off", "guard_on"):
        per_model: dict[str, object] = {}
        for model in BENCHMARK_NAMES:
            ratios = [f["policies"][name]["ratio"][model] for f in figures]
            worst = [f["policies"][name]["worst_prefix_ratio"][model] for f in figures]
            known = [r for r in ratios if r is not None]
            per_model[model] = {
                "mean_ratio": round(sum(known) / len(known), 4) if known else None,
                "worst_so_far": max((w for w in worst if w is not None), default=None),
            }
        out[name] = per_model
    return out


if __name__ == "__main__":
    main()
