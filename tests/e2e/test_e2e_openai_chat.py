"""End to end: the real ``openai`` SDK, a real mitmdump with obsmask, a stub provider.

A real ``mitmdump`` with the addon in reverse-proxy mode in front of a local
OpenAI-compatible stub that records the bodies it receives, driven by the real
``openai`` client over 12 turns of tool calling (``stream=True`` on some
turns); the stub receives the masked bodies, the client gets every answer
unchanged, and streamed answers arrive as a stream.

The agent (tests/clients/chat_agent.py) runs in the clients' virtual
environment, ``OBSMASK_CLIENTS_PYTHON``; scripts/test.py sets it.

The expected masked bodies come from the helper ``mask_old_tool_results``
(support/chat_masking.py; a tool turn is an assistant message with
``tool_calls``, and the results of the last ``window_turns`` tool turns stay
intact), and are checked on their own against the invariants of masking: no
message added, removed or reordered, ``tool_call_id`` and ``tool_calls``
untouched, nothing changed but the ``content`` of ``role: "tool"`` messages.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from obsmask_core.conversation.settings.policy import MaskPolicy
from support.agents import CLIENTS, needs_clients, run_agent
from support.chat_masking import mask_old_tool_results
from support.processes import REPO, MitmdumpProcess, running_mitmdump
from support.recording_server import Answer, Recorded, recording_server

AGENT = CLIENTS / "chat_agent.py"

WINDOW_TURNS = 3
POLICY = MaskPolicy(window_turns=WINDOW_TURNS)
TOOL_TURNS = 12
# 0-based request numbers sent with stream=True: tool calls (9 has two
# parallel calls) and the final text answer.
STREAM_TURNS = (2, 5, 9, 12)
# Tool turns whose assistant message holds two parallel calls.
PARALLEL_TURNS = (4, 9)
CREATED = 1_700_000_000
MASKED_LINE = re.compile(r"obsmask: POST /v1/chat/completions: masked (\d+) of (\d+) tool results")

pytestmark = [pytest.mark.e2e, needs_clients]


# The stub provider ---------------------------------------------------------


@dataclass
class SentAnswer:
    """What the stub answered to one request, as it wrote it."""

    turn: int
    stream: bool
    body: bytes = b""  # a plain JSON answer
    chunks: list[dict[str, Any]] = field(default_factory=list)  # an SSE answer


class ChatStub:
    """An OpenAI-compatible Chat Completions server that plays a tool-using model.

    The turn is the number of assistant messages with tool_calls in the
    request: below ``tool_turns`` the "model" calls tools, then it answers
    with text. A streamed answer stops after its first chunk until the client
    calls ``GET /release/<turn>`` or ``release_wait`` seconds pass; ``released``
    records which happened, i.e. whether the first chunk reached the client
    while the rest was still unwritten.
    """

    def __init__(self, tool_turns: int, release_wait: float) -> None:
        self.tool_turns = tool_turns
        self.release_wait = release_wait
        self.sent: list[SentAnswer] = []
        self.released: dict[int, bool] = {}
        self._events: dict[int, threading.Event] = {}
        self._lock = threading.Lock()

    def _event(self, turn: int) -> threading.Event:
        with self._lock:
            return self._events.setdefault(turn, threading.Event())

    def __call__(self, recorded: Recorded) -> Answer:
        release = re.fullmatch(r"/release/(\d+)", recorded.path)
        if recorded.method == "GET" and release:
            self._event(int(release.group(1))).set()
            return Answer(headers={"content-type": "text/plain"}, body=b"released")
        if recorded.method != "POST" or not recorded.path.endswith("/chat/completions"):
            return Answer(status=404, body=b'{"error": {"message": "not found"}}')
        request = json.loads(recorded.body)
        turn = sum(
            1 for m in request["messages"] if m.get("role") == "assistant" and m.get("tool_calls")
        )
        if request.get("stream"):
            return self._stream(turn, request, len(recorded.body))
        answer = self._completion(turn, request, len(recorded.body))
        body = json.dumps(answer).encode()
        with self._lock:
            self.sent.append(SentAnswer(turn, stream=False, body=body))
        return Answer(body=body)

    def calls(self, turn: int) -> list[tuple[str, str]]:
        """(name, arguments) of the calls of one tool turn."""
        read = ("read_file", json.dumps({"path": f"src/pkg/stage_{turn}.py"}))
        tests = (
            "run_tests",
            json.dumps({"selector": f"tests/test_stage_{turn}.py", "verbose": True}),
        )
        if turn in PARALLEL_TURNS:
            return [read, tests]
        return [read] if turn % 2 == 0 else [tests]

    def final_text(self, turn: int) -> str:
        return f"Done after {turn} tool turns: stage 1 raised ValueError, fixed in stage_2.py."

    def _usage(self, body_bytes: int) -> dict[str, int]:
        prompt = body_bytes // 4
        return {"prompt_tokens": prompt, "completion_tokens": 17, "total_tokens": prompt + 17}

    def _completion(self, turn: int, request: dict[str, Any], body_bytes: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "refusal": None}
        if turn < self.tool_turns:
            message["content"] = None
            message["tool_calls"] = [
                {
                    "id": f"call_{turn}_{n}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
                for n, (name, arguments) in enumerate(self.calls(turn))
            ]
            finish = "tool_calls"
        else:
            message["content"] = self.final_text(turn)
            finish = "stop"
        return {
            "id": f"chatcmpl-stub-{turn}",
            "object": "chat.completion",
            "created": CREATED + turn,
            "model": request["model"],
            "system_fingerprint": "fp_stub",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": self._usage(body_bytes),
        }

    def _chunks(self, turn: int, request: dict[str, Any], body_bytes: int) -> list[dict[str, Any]]:
        head = {
            "id": f"chatcmpl-stub-{turn}",
            "object": "chat.completion.chunk",
            "created": CREATED + turn,
            "model": request["model"],
            "system_fingerprint": "fp_stub",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {**head, "choices": [choice]}

        if turn < self.tool_turns:
            chunks = [chunk({"role": "assistant", "content": None, "refusal": None})]
            for n, (name, arguments) in enumerate(self.calls(turn)):
                chunks.append(
                    chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": n,
                                    "id": f"call_{turn}_{n}",
                                    "type": "function",
                                    "function": {"name": name, "arguments": ""},
                                }
                            ]
                        }
                    )
                )
                third = len(arguments) // 3 + 1
                for start in range(0, len(arguments), third):
                    piece = arguments[start : start + third]
                    chunks.append(
                        chunk({"tool_calls": [{"index": n, "function": {"arguments": piece}}]})
                    )
            chunks.append(chunk({}, "tool_calls"))
        else:
            chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
            words = self.final_text(turn).split(" ")
            chunks += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)]
            chunks.append(chunk({}, "stop"))
        if (request.get("stream_options") or {}).get("include_usage"):
            chunks.append({**head, "choices": [], "usage": self._usage(body_bytes)})
        return chunks

    def _stream(self, turn: int, request: dict[str, Any], body_bytes: int) -> Answer:
        chunks = self._chunks(turn, request, body_bytes)
        with self._lock:
            self.sent.append(SentAnswer(turn, stream=True, chunks=chunks))
        event = self._event(turn)

        def hold() -> None:
            self.released[turn] = event.wait(self.release_wait)

        events: list[bytes | Any] = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
        return Answer(
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"},
            body=[events[0], hold, *events[1:], b"data: [DONE]\n\n"],
        )


# Helpers -------------------------------------------------------------------


def _start_proxy_arguments(stub_url: str, config: Path, *extra: str) -> list[str]:
    return [
        "--mode",
        f"reverse:{stub_url}",
        # An empty settings file: the repository's mitm.toml must not count.
        "--set",
        f"obsmask_config={config}",
        "--set",
        f"obsmask_window_turns={WINDOW_TURNS}",
        *extra,
    ]


def _empty_config(tmp_path: Path) -> Path:
    config = tmp_path / "obsmask.toml"
    config.write_text("")
    return config


def _tool_turn_of_results(messages: list[dict[str, Any]]) -> dict[int, int]:
    """Position of each tool result -> number of the tool turn that called it."""
    turn_of_call: dict[str, int] = {}
    turns = 0
    out: dict[int, int] = {}
    for position, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            for call in message["tool_calls"]:
                turn_of_call[call["id"]] = turns
            turns += 1
        elif message.get("role") == "tool":
            out[position] = turn_of_call[message["tool_call_id"]]
    return out


def _invariant_problems(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """The invariants of masking, checked without the addon's code."""
    if len(before) != len(after):
        return [f"{len(before)} messages became {len(after)}"]
    problems = []
    for position, (old, new) in enumerate(zip(before, after, strict=True)):
        if old.get("role") == "tool":
            old, new = dict(old), dict(new)
            old.pop("content"), new.pop("content")
        if old != new:
            problems.append(f"message {position} changed: {old!r} -> {new!r}")
    return problems


def _spliced(text: str, replacements: list[tuple[str, str]], ascii_only: bool) -> str:
    """``text`` with each JSON-encoded original replaced by its encoded placeholder."""
    for original, placeholder in replacements:
        encoded = json.dumps(original)
        assert text.count(encoded) == 1, "every tool result is unique in the body"
        text = text.replace(encoded, json.dumps(placeholder, ensure_ascii=ascii_only))
    return text


def _masked_pairs(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> list[tuple[str, str]]:
    return [
        (old["content"], new["content"])
        for old, new in zip(before, after, strict=True)
        if old["content"] != new["content"]
    ]


def _masked_lines(
    proxy: MitmdumpProcess, count: int, timeout: float = 10.0
) -> list[tuple[int, int]]:
    """The (masked, total) of mitmdump's "masked" lines, once ``count`` are there."""
    deadline = time.monotonic() + timeout
    while True:
        found = [
            (int(m.group(1)), int(m.group(2)))
            for line in list(proxy.lines)
            if (m := MASKED_LINE.search(line))
        ]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _assert_answers_unchanged(stub: ChatStub, report: dict[str, Any]) -> None:
    """What the SDK handed the agent is what the stub wrote, answer by answer."""
    assert len(report["answers"]) == len(stub.sent)
    for got, sent in zip(report["answers"], stub.sent, strict=True):
        assert (got["turn"], got["stream"]) == (sent.turn, sent.stream)
        if sent.stream:
            assert got["content_type"].startswith("text/event-stream")
            assert [c["data"] for c in got["chunks"]] == sent.chunks, f"turn {sent.turn}"
        else:
            assert got["content_type"] == "application/json"
            assert got["raw_body"] == sent.body.decode("utf-8"), f"turn {sent.turn}"
            assert got["parsed"] == json.loads(sent.body), f"turn {sent.turn}"


# The tests -----------------------------------------------------------------


def _report(
    proxy: MitmdumpProcess, stub_url: str, turns: int, stream_turns: tuple[int, ...]
) -> dict[str, Any]:
    """The chat agent's report, run through ``proxy``."""
    report = run_agent(
        AGENT, f"http://127.0.0.1:{proxy.port}/v1", stub_url, turns, stream_turns, proxy
    )
    assert isinstance(report, dict)
    return report


def test_openai_agent_over_12_tool_turns_gets_masked_requests_and_unchanged_answers(
    tmp_path: Path,
) -> None:
    """The whole promise on one real agent run: the provider sees the expected
    masked bodies, the agent sees the provider's answers byte for byte, and
    streamed answers reach it chunk by chunk."""
    stub = ChatStub(tool_turns=TOOL_TURNS, release_wait=5.0)
    with recording_server(stub) as server:
        arguments = _start_proxy_arguments(server.url, _empty_config(tmp_path))
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            proxy.wait_for(rf"conversation masking on: window {WINDOW_TURNS} tool turns")
            report = _report(proxy, server.url, TOOL_TURNS, STREAM_TURNS)
            posts = server.posts("/chat/completions")

            # 12 tool turns, then the final text answer.
            assert len(posts) == TOOL_TURNS + 1
            assert len(report["requests"]) == TOOL_TURNS + 1
            assert report["final_messages"][-1]["content"] == stub.final_text(TOOL_TURNS)
            assert sum(len(stub.calls(t)) for t in range(TOOL_TURNS)) == sum(
                m["role"] == "tool" for m in report["final_messages"]
            )

            # The stub received exactly the client's body, old results masked.
            expected_lines: list[tuple[int, int]] = []
            for number, (sent, post) in enumerate(zip(report["requests"], posts, strict=True)):
                sent_text: str = sent["sent_body"]
                sent_body = json.loads(sent_text)
                assert sent_body["messages"] == sent["messages"], "the SDK sent our messages"
                assert bool(sent_body.get("stream")) == (number in STREAM_TURNS)
                expected_messages = mask_old_tool_results(sent_body["messages"], POLICY)
                assert not _invariant_problems(sent_body["messages"], expected_messages)
                received = json.loads(post.body)
                assert received == {**sent_body, "messages": expected_messages}, f"request {number}"
                # Byte for byte: the original text, only those contents replaced.
                pairs = _masked_pairs(sent_body["messages"], expected_messages)
                assert post.body.decode("utf-8") in {
                    _spliced(sent_text, pairs, ascii_only=False),
                    _spliced(sent_text, pairs, ascii_only=True),
                }, f"request {number}"
                if pairs:
                    tool_results = sum(m["role"] == "tool" for m in sent_body["messages"])
                    expected_lines.append((len(pairs), tool_results))

            # The window rule, read on the last request: results of the last
            # 3 tool turns and the traceback intact, every other one masked.
            last_sent = report["requests"][-1]["messages"]
            last_received = json.loads(posts[-1].body)["messages"]
            turn_of = _tool_turn_of_results(last_sent)
            tracebacks = [
                p for p in turn_of if last_sent[p]["content"].endswith("ValueError: boom")
            ]
            assert len(tracebacks) == 1 and turn_of[tracebacks[0]] < TOOL_TURNS - WINDOW_TURNS
            for position, turn in turn_of.items():
                original = last_sent[position]["content"]
                got = last_received[position]["content"]
                if turn >= TOOL_TURNS - WINDOW_TURNS or position in tracebacks:
                    assert got == original, f"result at {position} (turn {turn}) must stay"
                else:
                    assert got != original and len(got) < len(original)
                    assert last_sent[position]["tool_call_id"] in got
            # Requests 0 to WINDOW_TURNS hold no turn outside the window.
            assert len(expected_lines) == TOOL_TURNS + 1 - (WINDOW_TURNS + 1)

            # The agent got every answer unchanged, and the streams as streams.
            _assert_answers_unchanged(stub, report)
            assert stub.released == dict.fromkeys(STREAM_TURNS, True), (
                "the first chunk of every streamed answer must reach the agent "
                "before the stub writes the rest"
            )
            stream_answers = [a for a in report["answers"] if a["stream"]]
            assert [a["release_status"] for a in stream_answers] == [200] * len(STREAM_TURNS)
            # Parallel calls, one of them streamed (turn 9), came back whole.
            parallel = [m for m in report["final_messages"] if len(m.get("tool_calls") or []) == 2]
            assert len(parallel) == len(PARALLEL_TURNS)
            assert set(PARALLEL_TURNS) & set(STREAM_TURNS)

            # mitmdump said what it did, and nothing went wrong in the addon.
            assert _masked_lines(proxy, len(expected_lines)) == expected_lines
            output = proxy.output()
            assert "Traceback" not in output
            assert "internal error" not in output
            assert "forwarded unchanged" not in output


def test_stream_check_fails_when_mitmproxy_buffers_the_answer(tmp_path: Path) -> None:
    """The streaming check above can fail: with obsmask_stream_responses=false
    mitmproxy holds the SSE answer until it is complete, so the agent cannot
    release the stub before its wait runs out (and still gets every chunk).
    One streamed tool turn, then the final answer."""
    wait = 2.0
    stub = ChatStub(tool_turns=1, release_wait=wait)
    with recording_server(stub) as server:
        arguments = _start_proxy_arguments(
            server.url, _empty_config(tmp_path), "--set", "obsmask_stream_responses=false"
        )
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            report = _report(proxy, server.url, turns=1, stream_turns=(0,))
            assert len(server.posts("/chat/completions")) == 2
            assert stub.released == {0: False}
            first_chunk_at = report["answers"][0]["chunks"][0]["at"]
            assert first_chunk_at >= wait * 0.9, "buffered: nothing before the stub's timeout"
            _assert_answers_unchanged(stub, report)
            assert "internal error" not in proxy.output()
