"""A tool-calling agent loop on the real ``openai`` SDK, for the end-to-end tests.

Runs under the clients' Python (``OBSMASK_CLIENTS_PYTHON``), not the tests'
one: the SDK needs newer HTTP libraries than mitmproxy allows. It talks to
``--base-url`` (mitmdump in front of the test's stub) the way an agent does:
send the whole conversation, run the tools the model asked for, append their
results, send again, until the model answers with text.

    chat_agent.py --base-url http://127.0.0.1:PORT/v1 --stub-url http://127.0.0.1:STUB
                  [--turns 12] [--stream-turns 2,5,9,12]

The model asked for is ``OBSMASK_CHAT_AGENT_MODEL`` from the environment,
``stub-model`` without it. ``--turns`` is how many tool turns the agent
accepts before giving up (the stub decides when to stop). ``--stream-turns``
lists the 0-based request numbers sent with ``stream=True``; request number
k is the one that follows k tool turns. On a streamed request, as soon as
the first chunk has arrived the agent calls ``GET {stub-url}/release/{k}``
directly (not through the proxy): the stub holds the rest of its answer
until then, so the stub learns whether the first chunk reached the client
while the answer was still being written.

Prints one JSON document on stdout: every request as sent (the messages and
the exact body bytes the SDK wrote), every answer as the SDK gave it back
(raw body and parsed object, or each chunk with its arrival time).
"""

from __future__ import annotations

import copy
import json
import os
import time
from typing import Any

import httpx2
import openai
from agent_common import chat_assistant_message, fit, main, release

MODEL = os.environ.get("OBSMASK_CHAT_AGENT_MODEL", "stub-model")
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_tests",
            "description": "Run a selection of the test suite.",
            "parameters": {
                "type": "object",
                "properties": {
                    "selector": {"type": "string"},
                    "verbose": {"type": "boolean"},
                },
                "required": ["selector"],
            },
        },
    },
]
# The one tool result that is an error (kept when keep_errors):
# run_tests of tool turn 1.
TRACEBACK_TURN = 1


def _read_file_output(turn: int, arguments: dict[str, Any]) -> str:
    """A fake source file, different for every turn: what a file read returns."""
    path = arguments.get("path", "?")
    lines = [f"# {path} (read at turn {turn})", "from __future__ import annotations", ""]
    for n in range(200):
        lines += [
            f"def helper_{turn}_{n}(value: int) -> int:",
            f'    """Scale ``value`` for stage {n} of module {turn}."""',
            f"    return value * {n + 1} + {turn}",
            "",
        ]
    return fit(lines, 2000 + 97 * turn, 4000)


def _run_tests_output(turn: int, arguments: dict[str, Any]) -> str:
    """A passing pytest run, or for TRACEBACK_TURN a crash ending in ValueError."""
    selector = arguments.get("selector", "tests")
    if turn == TRACEBACK_TURN:
        frames = ["Traceback (most recent call last):"]
        for n in range(40):
            frames += [
                f'  File "/repo/src/pkg/stage_{n}.py", line {10 + n}, in run_stage_{n}',
                f"    return run_stage_{n + 1}(payload, depth={n})",
            ]
        body = fit(frames, 2100, 3900)
        return f"{body}\nValueError: boom"
    count = 120
    lines = [f"$ pytest {selector} -v", f"collected {count} items", ""]
    for n in range(count):
        lines.append(f"{selector}::test_case_{turn}_{n} PASSED [{(n + 1) * 100 // count:3d}%]")
    return fit(lines, 2300 + 89 * turn, 4000)


def tool_output(turn: int, name: str, arguments: str) -> str:
    """The deterministic result of one tool call (2,000 to 4,000 characters)."""
    parsed = json.loads(arguments) if arguments else {}
    if name == "read_file":
        return _read_file_output(turn, parsed)
    if name == "run_tests":
        return _run_tests_output(turn, parsed)
    return f"unknown tool {name!r}"


def _assistant_from_chunks(chunks: list[Any]) -> dict[str, Any]:
    """Rebuild the assistant message from the deltas, as streaming agents do."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                content.append(delta.content)
            for call in delta.tool_calls or []:
                slot = calls.setdefault(
                    call.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if call.id:
                    slot["id"] = call.id
                if call.function is not None:
                    if call.function.name:
                        slot["function"]["name"] += call.function.name
                    if call.function.arguments:
                        slot["function"]["arguments"] += call.function.arguments
    out: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        out["tool_calls"] = [calls[index] for index in sorted(calls)]
    return out


def run(base_url: str, stub_url: str, max_turns: int, stream_turns: set[int]) -> dict[str, Any]:
    sent_bodies: list[bytes] = []

    def remember_body(request: httpx2.Request) -> None:
        sent_bodies.append(request.read())

    http_client = openai.DefaultHttpxClient(
        event_hooks={"request": [remember_body]}, trust_env=False
    )
    client = openai.OpenAI(
        base_url=base_url, api_key="test-key", max_retries=0, timeout=30, http_client=http_client
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": "Find why the stage pipeline fails and fix it."},
    ]
    requests: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []
    for turn in range(max_turns + 1):
        stream = turn in stream_turns
        requests.append({"turn": turn, "stream": stream, "messages": copy.deepcopy(messages)})
        before = len(sent_bodies)
        if stream:
            started = time.monotonic()
            response = client.chat.completions.create(
                model=MODEL,
                messages=messages,  # type: ignore[arg-type]
                tools=TOOLS,  # type: ignore[arg-type]
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks: list[Any] = []
            recorded: list[dict[str, Any]] = []
            release_status = None
            for chunk in response:
                chunks.append(chunk)
                recorded.append(
                    {"at": time.monotonic() - started, "data": chunk.to_dict(mode="json")}
                )
                if release_status is None:
                    release_status = release(stub_url, turn)
            answers.append(
                {
                    "turn": turn,
                    "stream": True,
                    "content_type": response.response.headers.get("content-type"),
                    "release_status": release_status,
                    "chunks": recorded,
                }
            )
            assistant = _assistant_from_chunks(chunks)
        else:
            raw = client.chat.completions.with_raw_response.create(
                model=MODEL,
                messages=messages,  # type: ignore[arg-type]
                tools=TOOLS,  # type: ignore[arg-type]
            )
            completion = raw.parse()
            answers.append(
                {
                    "turn": turn,
                    "stream": False,
                    "content_type": raw.headers.get("content-type"),
                    "raw_body": raw.http_response.content.decode("utf-8"),
                    "parsed": completion.to_dict(mode="json"),
                }
            )
            assistant = chat_assistant_message(completion)
        if len(sent_bodies) != before + 1:
            raise SystemExit(f"turn {turn}: {len(sent_bodies) - before} HTTP requests, not 1")
        requests[-1]["sent_body"] = sent_bodies[-1].decode("utf-8")
        messages.append(assistant)
        calls = assistant.get("tool_calls") or []
        if not calls:
            break
        for call in calls:
            function = call["function"]
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": tool_output(turn, function["name"], function["arguments"]),
                }
            )
    else:
        raise SystemExit(f"the model still called tools after {max_turns} tool turns")
    return {
        "stream_turns": sorted(stream_turns),
        "requests": requests,
        "answers": answers,
        "final_messages": messages,
    }


if __name__ == "__main__":
    main(__doc__.split("\n\n")[0], "http://127.0.0.1:N/v1", run)
