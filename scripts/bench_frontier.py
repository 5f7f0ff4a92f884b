#!/usr/bin/env python3
"""Is the frontier's work linear in the request's size? Prints JSON.

    python3 scripts/bench_frontier.py
    python3 scripts/bench_frontier.py --repeat-history 1,10,40 --repeat 5

The frontier replays the conversation's history at every request (and, with
a price model, bills every earlier request twice). This times
``plan_masking`` (the tool-turn index built beforehand, as the rewrite does)
with the shipped settings (mitm.toml, ledger on) and with the plain window
(price_model none) on the last request of the longest real session
repeated 1, 5, 10, 20 and 40 times (``--repeat-history``: each copy with its
own call ids, so 40 copies are 4,480 tool turns and about 11 MB), next to a
``json.loads`` of the same body. Linear work shows as a flat time per
megabyte from the smallest body to the largest; the ratio of the largest
body's time per megabyte to the smallest's is printed as
"per_mb_growth" (1.0: linear; a quadratic replay would grow about 40x).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.one_request.inputs import repeat_history  # noqa: E402
from benchlib.timing import Action, medians_ms  # noqa: E402
from obsmask_core.conversation.planning.memory import PlanMemory  # noqa: E402
from obsmask_core.conversation.planning.planner import plan_masking  # noqa: E402
from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values  # noqa: E402
from obsmask_core.conversation.turns.wire_formats import CHAT  # noqa: E402
from obsmask_core.shared.config_file import load_config  # noqa: E402
from obsmask_core.shared.settings import build  # noqa: E402

SESSION = REPO / "fixtures/sessions/chat/deepseek_chat_dev__sqlfluff__sqlfluff-1517.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat-history", default="1,5,10,20,40",
                        help="copies of the session's history, comma separated")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per body (default: as many as fit in 2 s, 3 to 21)")
    args = parser.parse_args()
    shipped = build(MaskPolicy, policy_values(load_config(str(REPO / "mitm.toml")), ""))
    policies = {"shipped": shipped, "plain_window": MaskPolicy(window_turns=shipped.window_turns)}
    original = SESSION.read_bytes()
    copies_list = [int(part) for part in args.repeat_history.split(",")]
    rows = [measure(repeat_history(original, CHAT, copies), copies, policies, args.repeat)
            for copies in copies_list]
    first, last = rows[0]["ms_per_mb"], rows[-1]["ms_per_mb"]
    growth = {name: round(last[name] / first[name], 2) for name in first}
    print(json.dumps({"session": SESSION.name, "rows": rows, "per_mb_growth": growth}, indent=2))


class Row(TypedDict):
    copies: int
    bytes: int
    tool_turns: int
    runs: int
    masked_shipped: int
    ms: dict[str, float]
    ms_per_mb: dict[str, float]


def measure(body: bytes, copies: int, policies: dict[str, MaskPolicy],
            repeat: int | None) -> Row:
    """The plan's time on one body under each policy, next to json.loads."""
    items = json.loads(body)["messages"]
    index = CHAT.index(items)

    def planner(policy: MaskPolicy) -> Action:
        memory = PlanMemory()  # kept from one run to the next, as the proxy keeps it
        return lambda: plan_masking(index, policy, items, memory=memory)

    actions: dict[str, Action] = {name: planner(policy) for name, policy in policies.items()}
    actions["json_loads"] = lambda: json.loads(body)
    times, runs = medians_ms(actions, repeat, 2.0, 3, 21)
    megabytes = len(body) / 1e6
    return {
        "copies": copies, "bytes": len(body), "tool_turns": len(index.turns), "runs": runs,
        "masked_shipped": plan_masking(index, policies["shipped"], items).masked,
        "ms": {name: round(value, 2) for name, value in times.items()},
        "ms_per_mb": {name: round(value / megabytes, 2) for name, value in times.items()},
    }


if __name__ == "__main__":
    main()
