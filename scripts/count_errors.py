#!/usr/bin/env python3
"""Count the tool results that ``keep_errors`` keeps in real sessions.

    python3 scripts/count_errors.py                 # the ten sessions in fixtures/sessions/chat/
    python3 scripts/count_errors.py body.json ...   # any Chat Completions bodies

Prints JSON: for each body and in total, how many tool results (``role:
"tool"`` messages with a string content) there are and how many of them read
as an error (``looks_like_error``: what ``keep_errors`` keeps).
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

from obsmask_core.conversation.planning.error_heuristic import looks_like_error  # noqa: E402

SESSIONS = REPO / "fixtures/sessions/chat"


def tool_texts(body: object) -> list[str]:
    """The string contents of a Chat Completions body's tool messages."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return []
    return [message["content"] for message in messages
            if isinstance(message, dict) and message.get("role") == "tool"
            and isinstance(message.get("content"), str)]


def count(texts: list[str]) -> dict[str, int]:
    return {
        "results": len(texts),
        "kept": sum(looks_like_error(text) for text in texts),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("bodies", nargs="*", type=Path,
                        help="Chat Completions bodies (default: fixtures/sessions/chat/*.json)")
    paths = parser.parse_args().bodies or sorted(SESSIONS.glob("*.json"))
    per_body: dict[str, dict[str, int]] = {}
    every_text: list[str] = []
    for path in paths:
        texts = tool_texts(json.loads(path.read_text(encoding="utf-8")))
        per_body[path.name] = count(texts)
        every_text += texts
    print(json.dumps({"total": count(every_text), "bodies": per_body}, indent=2))


if __name__ == "__main__":
    main()
