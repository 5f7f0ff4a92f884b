"""A tool-using agent loop on the real ``openai`` SDK's Responses API, for the
end-to-end tests.

Runs under the clients' Python (``OBSMASK_CLIENTS_PYTHON``), not the tests'
one. It talks to ``--base-url`` (mitmdump in front of the test's stub) the way
a stateless Responses agent does (no ``previous_response_id``): send the whole
``input``, append the model's output items to it, run the ``function_call``
items and append one ``function_call_output`` item per call, send again,
until the model answers with a message only.

    responses_agent.py --base-url http://127.0.0.1:PORT/v1 --stub-url http://127.0.0.1:STUB
                       [--turns 12] [--stream-turns 2,9,12]

``--turns`` is how many tool turns the agent accepts before giving up (the
stub decides when to stop). ``--stream-turns`` lists the 0-based request
numbers sent with ``stream=True``; request k is the one that follows k tool
turns. On a streamed request, as soon as the SDK has handed over the first
event the agent calls ``GET {stub-url}/release/{k}`` directly (not through
the proxy): the stub holds the rest of its answer until then. A streamed
answer's output items are taken from its ``response.output_item.done``
events, as streaming agents do.

Tool outputs are 2,000 to 4,000 characters; ``run_tests`` of tool turn
``TRACEBACK_TURN`` is a Python traceback ending in ``ValueError: boom``.

Prints one JSON document on stdout: every request as sent (the input items
and the exact body bytes the SDK wrote), every answer as received (the raw
body and the parsed response, or the raw bytes of the stream and each parsed
event, with their arrival times).
"""

from __future__ import annotations

import copy
import json
import time

import httpx2
import openai
from agent_common import TeeStream, fit, main, release

MODEL = "gpt-stub-1"
INSTRUCTIONS = "You are a coding agent. Use the tools."
TOOLS: list[dict[str, object]] = [
    {
        "type": "function",
        "name": "read_file",
        "description": "Read a file of the repository.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        "strict": True,
    },
    {
        "type": "function",
        "name": "run_tests",
        "description": "Run a selection of the test suite.",
        "parameters": {
            "type": "object",
            "properties": {"selector": {"type": "string"}, "verbose": {"type": "boolean"}},
            "required": ["selector", "verbose"],
            "additionalProperties": False,
        },
        "strict": True,
    },
]
# run_tests of this tool turn crashes: a traceback (kept by keep_errors).
TRACEBACK_TURN = 1

Json = dict[str, object]


def _read_file_output(turn: int, path: str) -> str:
    lines = [f"// {path} (read at turn {turn})", ""]
    for n in range(200):
        lines += [
            f"export function stage{turn}Step{n}(value: number): number {{",
            f"  // scale value for step {n} of stage {turn}",
            f"  return value * {n + 2} - {turn};",
            "}",
        ]
    return fit(lines, 2050 + 101 * turn, 4000)


def _run_tests_output(turn: int, selector: str) -> str:
    if turn == TRACEBACK_TURN:
        frames = ["Traceback (most recent call last):"]
        for n in range(40):
            frames += [
                f'  File "/repo/src/pipeline/step_{n}.py", line {20 + n}, in step_{n}',
                f"    return step_{n + 1}(state, attempt={n})",
            ]
        return fit(frames, 2200, 3900) + "\nValueError: boom"
    count = 110
    lines = [f"$ pytest {selector}", f"collected {count} items", ""]
    for n in range(count):
        lines.append(f"{selector}::test_step_{turn}_{n} PASSED [{(n + 1) * 100 // count:3d}%]")
    return fit(lines, 2400 + 83 * turn, 4000)


def tool_output(turn: int, name: str, arguments: str) -> str:
    """The deterministic result of one function call."""
    parsed = json.loads(arguments) if arguments else {}
    if name == "read_file":
        return _read_file_output(turn, str(parsed.get("path")))
    if name == "run_tests":
        return _run_tests_output(turn, str(parsed.get("selector")))
    return f"unknown tool {name!r}"


def _items_from_events(events: list[Json]) -> list[Json]:
    """The output items of a streamed response, from ``response.output_item.done``."""
    done: dict[int, Json] = {}
    for event in events:
        if event["type"] == "response.output_item.done":
            index = event["output_index"]
            item = event["item"]
            assert isinstance(index, int) and isinstance(item, dict)
            done[index] = item
    return [done[index] for index in sorted(done)]


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

    http_client = openai.DefaultHttpxClient(
        event_hooks={"request": [remember_body], "response": [tee_stream]}, trust_env=False
    )
    client = openai.OpenAI(
        base_url=base_url, api_key="test", max_retries=0, timeout=30, http_client=http_client
    )
    items: list[Json] = [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Find why the stage pipeline fails and fix it."}
            ],
        }
    ]
    requests: list[Json] = []
    answers: list[Json] = []
    for turn in range(max_turns + 1):
        stream = turn in stream_turns
        requests.append({"turn": turn, "stream": stream, "input": copy.deepcopy(items)})
        before = len(sent_bodies)
        arguments = {
            "model": MODEL,
            "instructions": INSTRUCTIONS,
            "tools": TOOLS,
            "input": items,
            "store": False,
        }
        if stream:
            started = time.monotonic()
            response = client.responses.create(**arguments, stream=True)  # type: ignore[call-overload]
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
            output = _items_from_events(events)
        else:
            with_raw = client.responses.with_raw_response.create(**arguments)  # type: ignore[call-overload]
            parsed = with_raw.parse()
            answers.append(
                {
                    "turn": turn,
                    "stream": False,
                    "content_type": with_raw.headers.get("content-type"),
                    "raw_body": with_raw.http_response.content.decode("utf-8"),
                    "parsed": parsed.to_dict(mode="json"),
                }
            )
            output = [item.to_dict(mode="json") for item in parsed.output]
        if len(sent_bodies) != before + 1:
            raise SystemExit(f"turn {turn}: {len(sent_bodies) - before} HTTP requests, not 1")
        requests[-1]["sent_body"] = sent_bodies[-1].decode("utf-8")
        items.extend(output)
        calls = [item for item in output if item.get("type") == "function_call"]
        if not calls:
            break
        for call in calls:
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": call["call_id"],
                    "output": tool_output(turn, str(call["name"]), str(call["arguments"])),
                }
            )
    else:
        raise SystemExit(f"the model still called tools after {max_turns} tool turns")
    return {
        "stream_turns": sorted(stream_turns),
        "requests": requests,
        "answers": answers,
        "final_items": items,
    }


if __name__ == "__main__":
    main(__doc__.split("\n\n")[0], "http://127.0.0.1:N/v1", run)
