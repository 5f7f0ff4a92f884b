#!/usr/bin/env python3
"""What recall costs. Prints JSON.

    python3 scripts/bench_recall.py
    python3 scripts/bench_recall.py --repeat-history 1,10 --recalls 20

Two questions, each answered side by side in one run (ratios, not absolute
times: the machines are noisy):

- The request rewrite. The whole rewrite (a masker's ``mask``, the
  shipped settings) of the last request of the longest real session,
  repeated (``--repeat-history``), with recall off, with recall on and no
  stub in the request, and with recall on and ``--recalls`` recall turns
  appended (each a stub naming an old result, which the rewrite replaces
  by the original), next to a ``json.loads`` + ``json.dumps`` of the body.
- The store. Keeping a cut string (compress and write, on the store's own
  thread in the proxy) and reading it back, for strings of 100 kB, 1 MB
  and 10 MB of that session's tool output, and the size it takes on disk;
  the same in the SQLite file and in a Redis server side by side
  (``redis``, and ``redis_to_sqlite`` the ratios of their times), a
  redis-server the script starts on 127.0.0.1 (a free port, its files in a
  temporary directory) and stops by its pid; without a redis-server on
  PATH (or ``OBSMASK_REDIS_SERVER``) the Redis half says why it is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NotRequired, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.one_request.inputs import repeat_history  # noqa: E402
from benchlib.timing import Action, medians_ms  # noqa: E402
from obsmask_core.conversation.masking.masker import Masker  # noqa: E402
from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values  # noqa: E402
from obsmask_core.conversation.turns.wire_formats import CHAT  # noqa: E402
from obsmask_core.recall.redis_store import RedisRecallStore  # noqa: E402
from obsmask_core.recall.store import RecallStorage, RecallStore, StoreError  # noqa: E402
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


class RedisTimes(TypedDict):
    keep_ms: float
    recall_ms: float
    # What the store counts against its cap (compressed text and keys).
    counted_bytes_per_char: float


class StoreRow(TypedDict):
    chars: int
    # The SQLite file.
    keep_ms: float
    recall_ms: float
    strings_kept: int
    disk_bytes_per_char: float
    redis: NotRequired[RedisTimes]
    redis_to_sqlite: NotRequired[dict[str, float]]


REDIS_SERVER = os.environ.get("OBSMASK_REDIS_SERVER") or shutil.which("redis-server")


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
    masker = Masker(policy)
    outcome = masker.mask(stubbed, CHAT, recall=True)
    recalled = outcome.plan.recalled if outcome.plan is not None else 0
    actions: dict[str, Action] = {
        "recall_off": lambda: masker.mask(body, CHAT),
        "recall_on": lambda: masker.mask(body, CHAT, recall=True),
        "recall_stubs": lambda: masker.mask(stubbed, CHAT, recall=True),
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


def store_rows(session: bytes, repeat: int | None) -> dict[str, object]:
    """Keep and recall strings made of the session's own tool output, in
    the SQLite file and in Redis."""
    messages = json.loads(session)["messages"]
    output = "".join(m["content"] for m in messages
                     if m.get("role") == "tool" and isinstance(m.get("content"), str))
    texts = [(output * (chars // len(output) + 1))[:chars] for chars in STRING_SIZES]
    with tempfile.TemporaryDirectory() as directory, redis_server(Path(directory)) as url:
        rows: list[StoreRow] = []
        for text in texts:
            sqlite = RecallStore(Path(directory) / f"{len(text)}.sqlite3", max_bytes=1 << 30,
                                 max_age_seconds=86_400.0)
            times, kept = store_times(sqlite, text, repeat)
            row: StoreRow = {
                "chars": len(text), "keep_ms": times["keep"], "recall_ms": times["recall"],
                "strings_kept": kept,
                "disk_bytes_per_char": round(sqlite.disk_bytes() / (kept * len(text)), 3)}
            sqlite.close()
            if url is not None:
                redis = RedisRecallStore(url, key_prefix=f"bench-{len(text)}:",
                                         max_bytes=1 << 30, max_age_seconds=86_400.0)
                redis_times, kept = store_times(redis, text, repeat)
                row["redis"] = {
                    "keep_ms": redis_times["keep"], "recall_ms": redis_times["recall"],
                    "counted_bytes_per_char": round(redis.used_bytes() / (kept * len(text)), 3)}
                row["redis_to_sqlite"] = {
                    name: round(redis_times[name] / times[name], 2) for name in times}
                redis.close()
            rows.append(row)
    answer: dict[str, object] = {"rows": rows}
    if url is None:
        answer["redis_missing"] = ("no redis-server on PATH (Debian: apt-get install "
                                   "redis-server; or set OBSMASK_REDIS_SERVER)")
    return answer


def store_times(store: RecallStorage, text: str,
                repeat: int | None) -> tuple[dict[str, float], int]:
    """Median ms of keeping a new string and of recalling one; strings kept."""
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
    return {name: round(value, 2) for name, value in times.items()}, kept[0]


@contextmanager
def redis_server(directory: Path) -> Iterator[str | None]:
    """A redis-server on 127.0.0.1 (no persistence), stopped by its pid;
    None when there is none to start."""
    if REDIS_SERVER is None:
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(directory),
         "--save", "", "--appendonly", "no", "--loglevel", "warning"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"redis://127.0.0.1:{port}/0"
        probe_store = RedisRecallStore(url, key_prefix="probe:", max_bytes=1 << 20,
                                       max_age_seconds=60.0)
        deadline = time.monotonic() + 10
        while True:
            try:
                probe_store.get("cut-0000000000000000")
                break
            except StoreError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        probe_store.close()
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


if __name__ == "__main__":
    main()
