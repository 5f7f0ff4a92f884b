#!/usr/bin/env python3
"""Write fixtures/flows/chat_session.mitm, the saved flows of the replay test.

    python3 scripts/make_replay_fixture.py

Three requests of a real session (fixtures/sessions/chat/...django-10914,
cut just before the assistant messages of tool turns 6, 12 and 20), each
with a small answer, plus a GET /v1/models and a chat request whose body is
not JSON. Written with the mitmproxy of .venv/main-py3.11 (file format of
mitmproxy 11, which mitmproxy 12 reads too).
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")

from mitmproxy import io  # noqa: E402
from mitmproxy.test import tflow, tutils  # noqa: E402

SESSION = REPO / "fixtures/sessions/chat/deepseek_chat_test_1-100__django__django-10914.json"
OUT = REPO / "fixtures/flows/chat_session.mitm"
CUT_BEFORE_TURNS = (6, 12, 20)


def prefix_before_turn(document: dict, turn: int) -> dict:
    """The request the agent sent just before the assistant message of ``turn``."""
    seen = 0
    for position, message in enumerate(document["messages"]):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            if seen == turn - 1:
                return {**document, "messages": document["messages"][:position]}
            seen += 1
    return document


def flow(method: str, path: str, content: bytes, answer: bytes) -> object:
    request = tutils.treq(method=method.encode(), path=path.encode(), content=content)
    request.host, request.port, request.scheme = "api.deepseek.com", 443, "https"
    request.headers["content-type"] = "application/json"
    request.headers["authorization"] = "Bearer sk-fixture-not-a-key"
    response = tutils.tresp(content=answer)
    response.headers["content-type"] = "application/json"
    return tflow.tflow(req=request, resp=response)


def main() -> None:
    document = json.loads(SESSION.read_text(encoding="utf-8"))
    answer = json.dumps(
        {"id": "chatcmpl-fixture", "object": "chat.completion", "choices": []}
    ).encode()
    flows = [flow("GET", "/v1/models", b"", b'{"data": []}')]
    for turn in CUT_BEFORE_TURNS:
        body = json.dumps(prefix_before_turn(document, turn), ensure_ascii=False).encode()
        flows.append(flow("POST", "/v1/chat/completions", body, answer))
    flows.append(flow("POST", "/v1/chat/completions", b"this is not JSON {", answer))
    with open(OUT, "wb") as file:
        writer = io.FlowWriter(file)
        for item in flows:
            writer.add(item)
    print(f"wrote {len(flows)} flows to {OUT.relative_to(REPO)} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
