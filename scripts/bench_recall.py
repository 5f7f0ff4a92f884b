#!/usr/bin/env python3
"""What recall costs. Prints JSON.

    python3 scripts/bench_recall.py
    python3 scripts/bench_recall.py --repeat-history 1,10 --recalls 20

Two questions, each answered side by side in one run (ratios, not absolute
times: the machines are noisy):

- The request rewrite. The whole rewrite (``mask_request_body``, the
  shipped settings) of the last request of the longest real session,
  repeated (``--repeat-history``), with recall off, with recall on and no
  stub in the request, and with recall on and ``--recalls`` recall turns
  appended (each a stub naming an old result, which the rewrite replaces
  by the original), next to a ``json.loads`` + ``json.dumps`` of the body.
- The store. Keeping a cut string (compress and write, on the store's own
  thread in the proxy) and reading it back, for strings of 100 kB, 1 MB
  and 10 MB of that session's tool output, and the size it takes on disk.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.one_request.inputs import repeat_history  # noqa: E402
from benchlib.timing import Action, medians_ms  # noqa: E402
from obsmask_core.conversation.policy import MaskPolicy, policy_values  # noqa: E402
from obsmask_core.conversation.rewrite import mask_request_body  # noqa: E402
from obsmask_core.conversation.wire_formats import CHAT  # noqa: E402
from obsmask_core.recall.store import RecallStore  # noqa: E402
from obsmask_core.shared.config_file import load_config  # noqa: E402
from obsmask_core.shared.recall_text import RecallQuery, store_id  # noqa: E402
from obsmask_core.shared.settings import build  # noqa: E402

SESSION = REPO / "fixtures/sessions/chat/deepseek_chat_dev__sqlfluff__sqlfluff-1517.json"
STRING_SIZES = (100_000, 1_000_000, 10_000_000)


class RewriteRow(TypedDict):
    copies: int
    bytes: int
    # Stubs put back whole (the other recall results are old enough to be
    # masked again under the shipped window).
    recalled: int
    runs: int
    ms: dict[str, float]
    ratio_to_json_round_trip: dict[str, float]


class StoreRow(TypedDict):
    chars: int
    keep_ms: float
    recall_ms: float
    strings_kept: int
    disk_bytes_per_char: float


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat-history", default="1,10",
                        help="copies of the session's history, comma separated")
    parser.add_argument("--recalls", type=int, default=10,
                        help="recall turns appended for the 'recall_stubs' case")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per case (default: as many as fit in 2 s, 3 to 21)")
    args = parser.parse_args()
    policy = build(MaskPolicy, policy_values(load_config(str(REPO / "mitm.toml")), ""))
    original = SESSION.read_bytes()
    rows = [rewrite_row(repeat_history(original, CHAT, int(copies)), int(copies), policy,
                        args.recalls, args.repeat)
            for copies in args.repeat_history.split(",")]
    print(json.dumps({"session": SESSION.name, "rewrite": rows,
                      "store": store_rows(original, args.repeat)}, indent=2))


def with_recalls(body: bytes, count: int) -> bytes:
    """The body with ``count`` recall turns appended, each answered with the
    stub for one of the oldest results."""
    request = json.loads(body)
    messages = request["messages"]
    old = [m["tool_call_id"] for m in messages if m.get("role") == "tool"][:count]
    for number, call_id in enumerate(old):
        recall_id = f"call_recall_{number}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": recall_id, "type": "function",
             "function": {"name": "recall", "arguments": json.dumps({"id": call_id})}}]})
        messages.append({"role": "tool", "tool_call_id": recall_id,
                         "content": RecallQuery(call_id).stub()})
    return json.dumps(request, ensure_ascii=False).encode()


def rewrite_row(body: bytes, copies: int, policy: MaskPolicy, recalls: int,
                repeat: int | None) -> RewriteRow:
    stubbed = with_recalls(body, recalls)
    outcome = mask_request_body(stubbed, policy, CHAT, recall=True)
    recalled = outcome.plan.recalled if outcome.plan is not None else 0
    actions: dict[str, Action] = {
        "recall_off": lambda: mask_request_body(body, policy, CHAT),
        "recall_on": lambda: mask_request_body(body, policy, CHAT, recall=True),
        "recall_stubs": lambda: mask_request_body(stubbed, policy, CHAT, recall=True),
        "json_round_trip": lambda: json.dumps(json.loads(body)),
    }
    times, runs = medians_ms(actions, repeat, 2.0, 3, 21)
    base = times["json_round_trip"]
    return {
        "copies": copies, "bytes": len(body), "recalled": recalled, "runs": runs,
        "ms": {name: round(value, 2) for name, value in times.items()},
        "ratio_to_json_round_trip": {name: round(value / base, 2)
                                     for name, value in times.items()},
    }


def store_rows(session: bytes, repeat: int | None) -> list[StoreRow]:
    """Keep and recall strings made of the session's own tool output."""
    messages = json.loads(session)["messages"]
    output = "".join(m["content"] for m in messages
                     if m.get("role") == "tool" and isinstance(m.get("content"), str))
    with tempfile.TemporaryDirectory() as directory:
        return [store_row(Path(directory) / f"{chars}.sqlite3",
                          (output * (chars // len(output) + 1))[:chars], repeat)
                for chars in STRING_SIZES]


def store_row(path: Path, text: str, repeat: int | None) -> StoreRow:
    store = RecallStore(path, max_bytes=1 << 30, max_age_seconds=86_400.0)
    one = text + "!"
    store.put(store_id(one), one)
    kept = [1]
    # A new string each run (else a put only refreshes the age).
    texts = iter(f"{n:08d}{text}" for n in range(10_000))

    def keep() -> None:
        value = next(texts)
        store.put(store_id(value), value)
        kept[0] += 1

    times, _ = medians_ms({"keep": keep, "recall": lambda: store.get(store_id(one))},
                          repeat, 2.0, 3, 11)
    row: StoreRow = {"chars": len(text), "keep_ms": round(times["keep"], 2),
                     "recall_ms": round(times["recall"], 2), "strings_kept": kept[0],
                     "disk_bytes_per_char": round(store.disk_bytes() / (kept[0] * len(text)), 3)}
    store.close()
    return row

if __name__ == "__main__":
    main()
