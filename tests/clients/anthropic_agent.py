"""A tool-using agent loop on the real ``anthropic`` SDK (Messages API), for the
end-to-end tests.

Runs under the clients' Python (``OBSMASK_CLIENTS_PYTHON``), not the tests'
one. It talks to ``--base-url`` (mitmdump in front of the test's stub) the way
an agent does: send the whole conversation, run the tools the model asked for
(``tool_use`` blocks), send their results back as ``tool_result`` blocks in a
user message, until the model answers with text only.

    anthropic_agent.py --base-url http://127.0.0.1:PORT --stub-url http://127.0.0.1:STUB
                       [--turns 12] [--stream-turns 2,9,12]

``--turns`` is how many tool turns the agent accepts before giving up (the
stub decides when to stop). ``--stream-turns`` lists the 0-based request
numbers sent with ``stream=True``; request k is the one that follows k tool
turns. On a streamed request, as soon as the SDK has handed over the first
event the agent calls ``GET {stub-url}/release/{k}`` directly (not through
the proxy): the stub holds the rest of its answer until then.

The tool results cover what masking must tell apart: plain text of 2,000 to
4,000 characters, a Python traceback ending in ``ValueError: boom`` (turn
``TRACEBACK_TURN``), a refusal sent with ``"is_error": true`` whose text does
not read as an error (turn ``DENIED_TURN``), and a list of two text blocks
around a small base64 PNG (the ``render_chart`` tool).

Prints one JSON document on stdout: every request as sent (the messages and
the exact body bytes the SDK wrote), every answer as received (the raw body
and the parsed message, or the raw bytes of the stream and each parsed event,
with their arrival times).
"""

from __future__ import annotations

import base64
import copy
import json
import struct
import time
import zlib

import anthropic
import httpx2
from agent_common import TeeStream, fit, main, release

MODEL = "claude-stub-1"
MAX_TOKENS = 1024
SYSTEM = "You are a coding agent. Use the tools."
TOOLS: list[dict[str, object]] = [
    {
        "name": "read_file",
        "description": "Read a file of the repository.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    {
        "name": "run_tests",
        "description": "Run a selection of the test suite.",
        "input_schema": {
            "type": "object",
            "properties": {"selector": {"type": "string"}, "verbose": {"type": "boolean"}},
            "required": ["selector"],
        },
    },
    {
        "name": "render_chart",
        "description": "Render the timing chart of one pipeline stage, with its data.",
        "input_schema": {
            "type": "object",
            "properties": {"stage": {"type": "integer"}},
            "required": ["stage"],
        },
    },
]
# run_tests of this tool turn crashes: a traceback (kept by keep_errors).
TRACEBACK_TURN = 1
# read_file of this tool turn is refused: is_error true, ordinary-looking text.
DENIED_TURN = 2

Json = dict[str, object]


def _read_file_output(turn: int, path: str) -> str:
    lines = [f"# {path} (read at turn {turn})", "from __future__ import annotations", ""]
    for n in range(200):
        lines += [
            f"def helper_{turn}_{n}(value: int) -> int:",
            f'    """Scale ``value`` for stage {n} of module {turn}."""',
            f"    return value * {n + 1} + {turn}",
            "",
        ]
    return fit(lines, 2000 + 97 * turn, 4000)


def _run_tests_output(turn: int, selector: str) -> str:
    if turn == TRACEBACK_TURN:
        frames = ["Traceback (most recent call last):"]
        for n in range(40):
            frames += [
                f'  File "/repo/src/pkg/stage_{n}.py", line {10 + n}, in run_stage_{n}',
                f"    return run_stage_{n + 1}(payload, depth={n})",
            ]
        return fit(frames, 2100, 3900) + "\nValueError: boom"
    count = 120
    lines = [f"$ pytest {selector} -v", f"collected {count} items", ""]
    for n in range(count):
        lines.append(f"{selector}::test_case_{turn}_{n} PASSED [{(n + 1) * 100 // count:3d}%]")
    return fit(lines, 2300 + 89 * turn, 4000)


def _denied_output(path: str) -> str:
    """A refusal that reads like ordinary prose: only ``is_error`` marks it."""
    return (
        f"Reading {path} needs the user's approval first: the workspace policy only "
        "allows reads under docs/ until the plan is accepted. The file was not opened "
        "and nothing in the working tree was changed. Ask the user to approve the plan, "
        "or start with the documentation under docs/: its table of contents in "
        "docs/index.md lists one page per stage (stage_0 to stage_11), each with its "
        "inputs, its outputs and the tests that cover it."
    )


def _png(width: int, height: int) -> bytes:
    """A tiny, valid, deterministic RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(
        b"\x00" + bytes(v for x in range(width) for v in (x * 32 % 256, y * 32 % 256, 128))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def _chart_output(turn: int, stage: int) -> list[Json]:
    """Two text blocks around an image block: a list ``content``."""
    rows = [f"Timings of stage {stage} (rendered at turn {turn}), one row per run:"]
    rows += [
        f"run {n:3d}: {100 + (n * 37 + stage) % 250:4d} ms, {n % 7} retries" for n in range(80)
    ]
    first = fit(rows, 1300, 2000)
    notes = [f"Notes on stage {stage}:"]
    notes += [f"- run {n} was slower than the median by {(n * 13) % 90} ms" for n in range(60)]
    second = fit(notes, 900, 1500)
    image = base64.b64encode(_png(8, 8)).decode("ascii")
    return [
        {"type": "text", "text": first},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}},
        {"type": "text", "text": second},
    ]


def tool_result(turn: int, use: Json) -> Json:
    """The ``tool_result`` block answering one ``tool_use`` block."""
    name = use["name"]
    arguments = use["input"]
    assert isinstance(arguments, dict)
    block: Json = {"type": "tool_result", "tool_use_id": use["id"]}
    if name == "read_file" and turn == DENIED_TURN:
        block["content"] = _denied_output(str(arguments.get("path")))
        block["is_error"] = True
    elif name == "read_file":
        block["content"] = _read_file_output(turn, str(arguments.get("path")))
    elif name == "run_tests":
        block["content"] = _run_tests_output(turn, str(arguments.get("selector")))
    elif name == "render_chart":
        block["content"] = _chart_output(turn, int(arguments.get("stage", 0)))
    else:
        block["content"] = f"unknown tool {name!r}"
        block["is_error"] = True
    return block


def _content_from_events(events: list[Json]) -> list[Json]:
    """Rebuild the assistant's content blocks from the stream, as agents do."""
    blocks: dict[int, Json] = {}
    partial: dict[int, list[str]] = {}
    for event in events:
        kind = event["type"]
        index = event.get("index")
        if kind == "content_block_start":
            assert isinstance(index, int) and isinstance(event["content_block"], dict)
            blocks[index] = dict(event["content_block"])
            partial[index] = []
        elif kind == "content_block_delta":
            assert isinstance(index, int) and isinstance(event["delta"], dict)
            delta = event["delta"]
            if delta["type"] == "text_delta":
                blocks[index]["text"] = f"{blocks[index]['text']}{delta['text']}"
            elif delta["type"] == "input_json_delta":
                partial[index].append(str(delta["partial_json"]))
        elif kind == "content_block_stop":
            assert isinstance(index, int)
            if blocks[index]["type"] == "tool_use":
                text = "".join(partial[index])
                blocks[index]["input"] = json.loads(text) if text else {}
    return [blocks[index] for index in sorted(blocks)]


def run(base_url: str, stub_url: str, max_turns: int, stream_turns: set[int]) -> Json:
    sent_bodies: list[bytes] = []
    raw_streams: list[list[tuple[float, bytes]]] = []

    def remember_body(request: httpx2.Request) -> None:
        sent_bodies.append(request.read())

    def tee_stream(response: httpx2.Response) -> None:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            sink: list[tuple[float, bytes]] = []
            raw_streams.append(sink)
            assert isinstance(response.stream, httpx2.SyncByteStream)
            response.stream = TeeStream(response.stream, sink)

    http_client = anthropic.DefaultHttpxClient(
        event_hooks={"request": [remember_body], "response": [tee_stream]}, trust_env=False
    )
    client = anthropic.Anthropic(
        base_url=base_url, api_key="test", max_retries=0, timeout=30, http_client=http_client
    )
    messages: list[Json] = [
        {"role": "user", "content": "Find why the stage pipeline fails and fix it."}
    ]
    requests: list[Json] = []
    answers: list[Json] = []
    for turn in range(max_turns + 1):
        stream = turn in stream_turns
        requests.append({"turn": turn, "stream": stream, "messages": copy.deepcopy(messages)})
        before = len(sent_bodies)
        arguments = {
            "model": MODEL,
            "max_tokens": MAX_TOKENS,
            "system": SYSTEM,
            "tools": TOOLS,
            "messages": messages,
        }
        if stream:
            started = time.monotonic()
            response = client.messages.create(**arguments, stream=True)  # type: ignore[call-overload]
            events: list[Json] = []
            timed_events: list[Json] = []
            release_status = None
            for event in response:
                events.append(event.to_dict(mode="json"))
                timed_events.append({"at": time.monotonic() - started, "data": events[-1]})
                if release_status is None:
                    release_status = release(stub_url, turn)
            raw = raw_streams[-1]
            answers.append(
                {
                    "turn": turn,
                    "stream": True,
                    "content_type": response.response.headers.get("content-type"),
                    "release_status": release_status,
                    "events": timed_events,
                    "raw": [
                        {"at": at - started, "text": piece.decode("utf-8")} for at, piece in raw
                    ],
                }
            )
            content = _content_from_events(events)
        else:
            with_raw = client.messages.with_raw_response.create(**arguments)  # type: ignore[call-overload]
            message = with_raw.parse()
            answers.append(
                {
                    "turn": turn,
                    "stream": False,
                    "content_type": with_raw.headers.get("content-type"),
                    "raw_body": with_raw.http_response.content.decode("utf-8"),
                    "parsed": message.to_dict(mode="json"),
                }
            )
            content = [block.to_dict(mode="json") for block in message.content]
        if len(sent_bodies) != before + 1:
            raise SystemExit(f"turn {turn}: {len(sent_bodies) - before} HTTP requests, not 1")
        requests[-1]["sent_body"] = sent_bodies[-1].decode("utf-8")
        messages.append({"role": "assistant", "content": content})
        uses = [block for block in content if block.get("type") == "tool_use"]
        if not uses:
            break
        messages.append({"role": "user", "content": [tool_result(turn, use) for use in uses]})
    else:
        raise SystemExit(f"the model still called tools after {max_turns} tool turns")
    return {
        "stream_turns": sorted(stream_turns),
        "requests": requests,
        "answers": answers,
        "final_messages": messages,
    }


if __name__ == "__main__":
    main(__doc__.split("\n\n")[0], "http://127.0.0.1:N", run)
