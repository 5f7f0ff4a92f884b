"""End to end: the real ``anthropic`` and ``openai`` SDKs on the Anthropic
Messages and OpenAI Responses APIs, a real mitmdump with obsmask, stub providers.

A real ``mitmdump`` with the real ``anthropic`` and ``openai`` Python
clients (Messages and Responses APIs) against local stub servers that record
what they receive, over 12 tool turns, with streamed turns in each.

The agents (tests/clients/anthropic_agent.py, tests/clients/responses_agent.py)
run in the clients' virtual environment, ``OBSMASK_CLIENTS_PYTHON``;
scripts/test.py sets it.

The masking rule: a tool turn is a model turn that called tools, and the
results attached to the last ``window_turns`` tool turns stay intact; older
ones are masked. Read in each format the way the addon documents it:

- Anthropic Messages: a tool turn is an assistant message with at least one
  ``tool_use`` block; a result is a ``tool_result`` block of a user message,
  linked by ``tool_use_id``; only its ``content`` is replaced (a list: its text
  blocks become one text block holding the placeholder, images stay), and a
  result flagged ``"is_error": true`` is kept (keep_errors).
- OpenAI Responses: a tool turn is a run of consecutive ``function_call``
  items (parallel calls); a result is the ``function_call_output`` item with
  the same ``call_id``; only its ``output`` is replaced.

Each request the stub receives is compared with two things: the expected body
from the pure function ``mask_items`` (the addon's own model), and, on their
own, the invariants of masking (no message or item added, removed or
reordered, ids, ``tool_use.input`` and ``function_call.arguments`` untouched,
nothing changed but the replaced values) and the window rule recomputed here
from the tool turns.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.planning.error_heuristic import looks_like_error
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, RESPONSES, WireFormat
from support.agents import CLIENTS, needs_clients, run_agent
from support.caching_provider import AnthropicPromptCache, InvalidRequest, OpenAIPromptCache
from support.json_values import as_list, as_object, as_str
from support.processes import REPO, MitmdumpProcess, running_mitmdump
from support.recording_server import Answer, Recorded, recording_server
from support.splices import compact, splice_problems

ANTHROPIC_AGENT = CLIENTS / "anthropic_agent.py"
RESPONSES_AGENT = CLIENTS / "responses_agent.py"
RELEASE_WAIT = 5.0

WINDOW_TURNS = 3
POLICY = MaskPolicy(window_turns=WINDOW_TURNS)
TOOL_TURNS = 12
# 0-based request numbers sent with stream=True: a single call (2), two
# parallel calls after a text block (9), the final text answer (12).
STREAM_TURNS = (2, 9, 12)
# Tool turns that call two tools at once.
PARALLEL_TURNS = (4, 9)
# Anthropic tool turns whose tool_use blocks follow a text block.
PREFACED_TURNS = (0, 3, 6, 9)
# The agents' special results (see the agents): run_tests of turn 1 is a
# traceback; in the Anthropic run, read_file of turn 2 is refused with
# is_error, and turn 3 calls render_chart, whose result is a list of blocks.
TRACEBACK_TURN = 1
DENIED_TURN = 2
CHART_TURN = 3
CREATED = 1_700_000_000

Json = dict[str, object]

pytestmark = [pytest.mark.e2e, needs_clients]


# Reading parsed JSON ---------------------------------------------------------








@dataclass(frozen=True)
class Result:
    """One tool result of a conversation, found without the addon's code."""

    path: tuple[int, ...]  # message index (and block index, for Anthropic)
    call_id: str
    turn: int  # number of the tool turn that called it
    tool: str
    value: object  # the replaceable value: tool_result.content, or output
    is_error: bool = False


def _anthropic_calls(messages: list[object]) -> dict[str, tuple[int, str]]:
    """tool_use id -> (tool turn, tool name)."""
    calls: dict[str, tuple[int, str]] = {}
    turns = 0
    for message in map(as_object, messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        uses = [b for b in map(as_object, content) if b.get("type") == "tool_use"]
        for use in uses:
            calls[as_str(use["id"])] = (turns, as_str(use["name"]))
        turns += bool(uses)
    return calls


def _anthropic_results(messages: list[object]) -> list[Result]:
    calls = _anthropic_calls(messages)
    out = []
    for position, message in enumerate(map(as_object, messages)):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for number, block in enumerate(map(as_object, content)):
            if block.get("type") == "tool_result":
                call_id = as_str(block["tool_use_id"])
                turn, tool = calls[call_id]
                out.append(
                    Result(
                        (position, number),
                        call_id,
                        turn,
                        tool,
                        block["content"],
                        block.get("is_error") is True,
                    )
                )
    return out


def _responses_calls(items: list[object]) -> dict[str, tuple[int, str]]:
    """call_id -> (tool turn, tool name); a run of function_call items is one turn."""
    calls: dict[str, tuple[int, str]] = {}
    turns = 0
    in_run = False
    for item in map(as_object, items):
        if item.get("type") == "function_call":
            calls[as_str(item["call_id"])] = (turns, as_str(item["name"]))
            in_run = True
        elif in_run:
            turns += 1
            in_run = False
    return calls


def _responses_results(items: list[object]) -> list[Result]:
    calls = _responses_calls(items)
    out = []
    for position, item in enumerate(map(as_object, items)):
        if item.get("type") == "function_call_output":
            call_id = as_str(item["call_id"])
            turn, tool = calls[call_id]
            out.append(Result((position,), call_id, turn, tool, item["output"]))
    return out


def _value_at(items: list[object], path: tuple[int, ...]) -> object:
    """The replaceable value of the result at ``path``."""
    if len(path) == 2:
        block = as_object(as_list(as_object(items[path[0]])["content"])[path[1]])
        return block["content"]
    return as_object(items[path[0]])["output"]


def _without_values(items: list[object]) -> list[object]:
    """The conversation with every tool result's replaceable value taken out:
    what masking must leave exactly as it was."""
    out: list[object] = []
    for item in map(as_object, items):
        if item.get("type") == "function_call_output":
            out.append({k: v for k, v in item.items() if k != "output"})
        elif item.get("role") == "user" and isinstance(item.get("content"), list):
            blocks = [
                {k: v for k, v in b.items() if k != "content"}
                if b.get("type") == "tool_result"
                else b
                for b in map(as_object, as_list(item["content"]))
            ]
            out.append({**item, "content": blocks})
        else:
            out.append(item)
    return out


def _invariant_problems(before: list[object], after: list[object]) -> list[str]:
    """The invariants of masking on either format, checked without the
    addon's code: same number of messages/items in the same order, every id,
    ``tool_use.input``, ``function_call.arguments``, role, flag and other
    block unchanged; only the tool results' values may differ."""
    if len(before) != len(after):
        return [f"{len(before)} messages/items became {len(after)}"]
    return [
        f"message/item {position} changed outside its tool results: {old!r:.300} -> {new!r:.300}"
        for position, (old, new) in enumerate(
            zip(_without_values(before), _without_values(after), strict=True)
        )
        if old != new
    ]


def _text_of(value: object) -> str:
    """The text of a result value: a string, or the text blocks of a list."""
    if isinstance(value, str):
        return value
    blocks = [as_object(b) for b in as_list(value)]
    return "\n".join(as_str(b["text"]) for b in blocks if b.get("type") == "text")


def _check_placeholder(result: Result, got: object) -> list[str]:
    """A masked value: a short text naming the call and the tool; a list keeps
    its non-text blocks in place and holds one text block with that text."""
    where = f"{result.call_id} (turn {result.turn})"
    if isinstance(result.value, str):
        text = got
    else:
        blocks = [as_object(b) for b in as_list(result.value)]
        others = [b for b in blocks if b.get("type") != "text"]
        got_blocks = [as_object(b) for b in as_list(got)]
        first_text = next(i for i, b in enumerate(blocks) if b.get("type") == "text")
        if [b for b in got_blocks if b.get("type") != "text"] != others:
            return [f"{where}: the non-text blocks changed"]
        texts = [b for b in got_blocks if b.get("type") == "text"]
        if len(texts) != 1 or got_blocks.index(texts[0]) != first_text:
            return [f"{where}: not one text block at the first one's place: {got!r:.300}"]
        text = texts[0]["text"]
    if not isinstance(text, str):
        return [f"{where}: masked to a non-string {got!r:.200}"]
    problems = []
    if not len(text) < len(_text_of(result.value)):
        problems.append(f"{where}: the placeholder is not shorter than the result")
    if result.call_id not in text or result.tool not in text:
        problems.append(f"{where}: the placeholder does not name the call and tool: {text!r}")
    return problems


def _rule_problems(
    received: list[object],
    results: list[Result],
    tool_turns: int,
    kept: Callable[[Result], bool],
) -> tuple[list[str], int]:
    """The window rule, recomputed: results of the last WINDOW_TURNS tool turns,
    and those ``kept`` says must stay (errors), arrive intact; every other one
    arrives masked. Returns the problems and the number masked."""
    problems = []
    first_kept = tool_turns - WINDOW_TURNS
    masked = 0
    for result in results:
        got = _value_at(received, result.path)
        if result.turn >= first_kept or kept(result):
            if got != result.value:
                problems.append(f"{result.call_id} (turn {result.turn}) must stay intact")
        else:
            masked += 1
            problems += _check_placeholder(result, got)
    return problems, masked


# The stub providers ----------------------------------------------------------


@dataclass
class SentAnswer:
    """What a stub answered to one request, as it wrote it."""

    turn: int
    stream: bool
    body: bytes  # every byte of the body, SSE included
    events: list[tuple[str, Json]] = field(default_factory=list)  # an SSE answer


class StubProvider:
    """A provider that plays a tool-using model on one route.

    The turn is the number of tool turns in the request: below ``tool_turns``
    the "model" calls tools, then it answers with text. A streamed answer
    (``"stream": true``) stops after its first event until the client calls
    ``GET /release/<turn>`` or ``release_wait`` seconds pass; ``released``
    records which happened, i.e. whether the first event reached the client
    while the rest was still unwritten.

    The usage it reports is the body's length / 4, nothing cached, unless
    the subclass is given a ``cache`` (tests/support/caching_provider.py):
    then the usage is that prompt cache's, its figures in ``cache.bills``.
    """

    path = ""
    list_member = ""

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
        if recorded.method != "POST" or recorded.path.split("?")[0] != self.path:
            return Answer(status=404, body=b'{"error": {"message": "not found"}}')
        request = as_object(json.loads(recorded.body))
        turn = self.turn_of(as_list(request[self.list_member]))
        try:
            usage = self.usage(request, len(recorded.body))
        except InvalidRequest as refused:
            return Answer(status=400, body=json.dumps(refused.body()).encode())
        if request.get("stream"):
            events = self.events(turn, request, usage)
            encoded = [
                f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
            ]
            with self._lock:
                self.sent.append(SentAnswer(turn, True, b"".join(encoded), events))
            event = self._event(turn)

            def hold() -> None:
                self.released[turn] = event.wait(self.release_wait)

            return Answer(
                headers={"content-type": "text/event-stream", "cache-control": "no-cache"},
                body=[encoded[0], hold, *encoded[1:]],
            )
        body = json.dumps(self.answer(turn, request, usage)).encode()
        with self._lock:
            self.sent.append(SentAnswer(turn, False, body))
        return Answer(body=body)

    def turn_of(self, items: list[object]) -> int:
        raise NotImplementedError

    def usage(self, request: Json, body_bytes: int) -> Json:
        """The usage of the answer to ``request``, a body of ``body_bytes``."""
        raise NotImplementedError

    def answer(self, turn: int, request: Json, usage: Json) -> Json:
        raise NotImplementedError

    def events(self, turn: int, request: Json, usage: Json) -> list[tuple[str, Json]]:
        raise NotImplementedError

    def final_text(self, turn: int) -> str:
        return f"Done after {turn} tool turns: stage 1 raised ValueError, fixed in stage_2.py."

    def calls(self, turn: int) -> list[tuple[str, Json]]:
        """(tool name, arguments) of the calls of one tool turn."""
        read = ("read_file", {"path": f"src/pkg/stage_{turn}.py"})
        tests = ("run_tests", {"selector": f"tests/test_stage_{turn}.py", "verbose": True})
        if turn in PARALLEL_TURNS:
            return [read, tests]
        return [read] if turn % 2 == 0 else [tests]


def _pieces(text: str, count: int) -> list[str]:
    size = len(text) // count + 1
    return [text[start : start + size] for start in range(0, len(text), size)]


class AnthropicStub(StubProvider):
    """The Anthropic Messages API (``POST /v1/messages``): a Message object, or
    the SSE events message_start, ping, content_block_start/delta/stop (text_delta,
    input_json_delta), message_delta and message_stop."""

    path = "/v1/messages"
    list_member = "messages"

    def __init__(self, tool_turns: int, release_wait: float,
                 cache: AnthropicPromptCache | None = None) -> None:
        super().__init__(tool_turns, release_wait)
        self.cache = cache

    def usage(self, request: Json, body_bytes: int) -> Json:
        if self.cache is not None:
            return self.cache.bill(request).usage(17)
        return {
            "input_tokens": body_bytes // 4,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 17,
        }

    def turn_of(self, items: list[object]) -> int:
        return len({turn for turn, _ in _anthropic_calls(items).values()})

    def calls(self, turn: int) -> list[tuple[str, Json]]:
        if turn == CHART_TURN:
            return [("render_chart", {"stage": turn})]
        return super().calls(turn)

    def content(self, turn: int) -> list[Json]:
        """The assistant's content blocks at ``turn``."""
        if turn >= self.tool_turns:
            return [{"type": "text", "text": self.final_text(turn)}]
        blocks: list[Json] = []
        if turn in PREFACED_TURNS:
            blocks.append({"type": "text", "text": f"Stage {turn} next: let me look at it."})
        blocks += [
            {"type": "tool_use", "id": f"toolu_{turn}_{n}", "name": name, "input": arguments}
            for n, (name, arguments) in enumerate(self.calls(turn))
        ]
        return blocks

    def _message(self, turn: int, request: Json, usage: Json) -> Json:
        return {
            "id": f"msg_stub_{turn}",
            "type": "message",
            "role": "assistant",
            "model": request["model"],
            "content": self.content(turn),
            "stop_reason": "tool_use" if turn < self.tool_turns else "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }

    def answer(self, turn: int, request: Json, usage: Json) -> Json:
        return self._message(turn, request, usage)

    def events(self, turn: int, request: Json, usage: Json) -> list[tuple[str, Json]]:
        message = self._message(turn, request, usage)
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**as_object(message["usage"]), "output_tokens": 1},
        }
        out: list[tuple[str, Json]] = [
            ("message_start", {"type": "message_start", "message": start}),
            ("ping", {"type": "ping"}),
        ]

        def add(kind: str, **fields: object) -> None:
            out.append((kind, {"type": kind, **fields}))

        for index, block in enumerate(self.content(turn)):
            if block["type"] == "text":
                add("content_block_start", index=index, content_block={"type": "text", "text": ""})
                words = as_str(block["text"]).split(" ")
                for number, word in enumerate(words):
                    piece = word if number == 0 else " " + word
                    add(
                        "content_block_delta",
                        index=index,
                        delta={"type": "text_delta", "text": piece},
                    )
            else:
                add("content_block_start", index=index, content_block={**block, "input": {}})
                for piece in ["", *_pieces(json.dumps(block["input"]), 3)]:
                    add(
                        "content_block_delta",
                        index=index,
                        delta={"type": "input_json_delta", "partial_json": piece},
                    )
            add("content_block_stop", index=index)
        add(
            "message_delta",
            delta={"stop_reason": message["stop_reason"], "stop_sequence": None},
            # With a cache, cumulative figures, as the API sends them now.
            usage=usage if self.cache is not None else {"output_tokens": 17},
        )
        add("message_stop")
        return out


class ResponsesStub(StubProvider):
    """The OpenAI Responses API (``POST /v1/responses``): a Response object, or
    the SSE events response.created, response.in_progress,
    response.output_item.added/done, response.function_call_arguments.delta/done,
    response.content_part.added/done, response.output_text.delta/done and
    response.completed."""

    path = "/v1/responses"
    list_member = "input"

    def __init__(self, tool_turns: int, release_wait: float,
                 cache: OpenAIPromptCache | None = None) -> None:
        super().__init__(tool_turns, release_wait)
        self.cache = cache

    def usage(self, request: Json, body_bytes: int) -> Json:
        if self.cache is not None:
            return self.cache.bill(request).responses_usage(17)
        return {
            "input_tokens": body_bytes // 4,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 17,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": body_bytes // 4 + 17,
        }

    def turn_of(self, items: list[object]) -> int:
        return len({turn for turn, _ in _responses_calls(items).values()})

    def output(self, turn: int) -> list[Json]:
        """The response's output items at ``turn``."""
        if turn >= self.tool_turns:
            part = {
                "type": "output_text",
                "annotations": [],
                "logprobs": [],
                "text": self.final_text(turn),
            }
            return [
                {
                    "id": f"msg_{turn}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [part],
                }
            ]
        return [
            {
                "id": f"fc_{turn}_{n}",
                "type": "function_call",
                "status": "completed",
                "arguments": json.dumps(arguments),
                "call_id": f"call_{turn}_{n}",
                "name": name,
            }
            for n, (name, arguments) in enumerate(self.calls(turn))
        ]

    def _response(
        self, turn: int, request: Json, usage: Json, output: list[Json] | None
    ) -> Json:
        """The Response object: complete with ``output``, in progress without."""
        return {
            "id": f"resp_stub_{turn}",
            "object": "response",
            "created_at": CREATED + turn,
            "status": "in_progress" if output is None else "completed",
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": request.get("instructions"),
            "max_output_tokens": None,
            "model": request["model"],
            "output": output or [],
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": request.get("store", True),
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": request.get("tools", []),
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": None if output is None else usage,
            "user": None,
            "metadata": {},
        }

    def answer(self, turn: int, request: Json, usage: Json) -> Json:
        return self._response(turn, request, usage, self.output(turn))

    def events(self, turn: int, request: Json, usage: Json) -> list[tuple[str, Json]]:
        out: list[tuple[str, Json]] = []

        def add(kind: str, **fields: object) -> None:
            out.append((kind, {"type": kind, "sequence_number": len(out), **fields}))

        pending = self._response(turn, request, usage, None)
        add("response.created", response=pending)
        add("response.in_progress", response=pending)
        output = self.output(turn)
        for index, item in enumerate(output):
            item_id = item["id"]
            if item["type"] == "function_call":
                added = {**item, "status": "in_progress", "arguments": ""}
                add("response.output_item.added", output_index=index, item=added)
                arguments = as_str(item["arguments"])
                for piece in _pieces(arguments, 3):
                    add(
                        "response.function_call_arguments.delta",
                        item_id=item_id,
                        output_index=index,
                        delta=piece,
                    )
                add(
                    "response.function_call_arguments.done",
                    item_id=item_id,
                    output_index=index,
                    arguments=arguments,
                )
            else:
                part = as_object(as_list(item["content"])[0])
                added = {**item, "status": "in_progress", "content": []}
                add("response.output_item.added", output_index=index, item=added)
                empty = {**part, "text": ""}
                where = {"item_id": item_id, "output_index": index, "content_index": 0}
                add("response.content_part.added", **where, part=empty)
                text = as_str(part["text"])
                for number, word in enumerate(text.split(" ")):
                    delta = word if number == 0 else " " + word
                    add("response.output_text.delta", **where, delta=delta, logprobs=[])
                add("response.output_text.done", **where, text=text, logprobs=[])
                add("response.content_part.done", **where, part=part)
            add("response.output_item.done", output_index=index, item=item)
        add("response.completed", response=self._response(turn, request, usage, output))
        return out


# Helpers -----------------------------------------------------------------------


def _proxy_arguments(stub_url: str, config: Path, *extra: str) -> list[str]:
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


def _check_requests(
    report: Json,
    posts: list[Recorded],
    fmt: WireFormat,
    results_of: Callable[[list[object]], list[Result]],
    kept: Callable[[Result], bool],
) -> tuple[list[tuple[int, int]], list[int]]:
    """Every request, against what the client sent: exactly the client's body
    with ``mask_items`` applied to its conversation, byte for byte outside the
    replaced values, the invariants of masking intact, and the window rule
    recomputed here.
    Returns the (masked, total) expected in mitmdump's log, and the number of
    results masked per request."""
    requests = as_list(report["requests"])
    assert len(requests) == len(posts) == TOOL_TURNS + 1
    lines: list[tuple[int, int]] = []
    masked_counts: list[int] = []
    for number, (sent, post) in enumerate(zip(map(as_object, requests), posts, strict=True)):
        sent_text = as_str(sent["sent_body"])
        sent_body = as_object(json.loads(sent_text))
        items = as_list(sent_body[fmt.list_member])
        # Premises: the SDK sent our conversation, compact (as splice_problems reads it).
        assert items == sent[fmt.list_member], f"request {number}: the SDK changed the list"
        assert bool(sent_body.get("stream")) == (number in STREAM_TURNS)
        assert compact(sent_body) == sent_text, f"request {number}: not compact JSON"

        expected = mask_items(items, POLICY, fmt)
        received = as_object(json.loads(post.body))
        assert received == {**sent_body, fmt.list_member: expected}, f"request {number}"

        # On their own: the invariants, the window rule, and every other byte as sent.
        received_items = as_list(received[fmt.list_member])
        assert _invariant_problems(items, received_items) == [], f"request {number}"
        results = results_of(items)
        assert len({r.turn for r in results}) == number
        problems, masked = _rule_problems(received_items, results, number, kept)
        assert problems == [], f"request {number}"
        replaced = [
            (r.value, _value_at(received_items, r.path))
            for r in results
            if _value_at(received_items, r.path) != r.value
        ]
        assert len(replaced) == masked
        assert splice_problems(sent_text, post.body.decode("utf-8"), replaced) == [], (
            f"request {number}"
        )
        masked_counts.append(masked)
        if masked:
            lines.append((masked, len(results)))
    return lines, masked_counts


def _assert_answers_unchanged(stub: StubProvider, report: Json, skipped: set[str]) -> None:
    """What reached the agent is what the stub wrote, answer by answer: the
    same bytes, and the SDK parsed the same objects (events the SDK drops, such
    as Anthropic's ``ping``, named in ``skipped``)."""
    answers = [as_object(a) for a in as_list(report["answers"])]
    assert len(answers) == len(stub.sent)
    for got, sent in zip(answers, stub.sent, strict=True):
        assert (got["turn"], got["stream"]) == (sent.turn, sent.stream)
        if sent.stream:
            assert as_str(got["content_type"]).startswith("text/event-stream")
            raw = "".join(as_str(as_object(piece)["text"]) for piece in as_list(got["raw"]))
            assert raw == sent.body.decode("utf-8"), f"turn {sent.turn}: SSE bytes changed"
            parsed = [as_object(e)["data"] for e in as_list(got["events"])]
            assert parsed == [data for name, data in sent.events if name not in skipped]
        else:
            assert got["content_type"] == "application/json"
            assert got["raw_body"] == sent.body.decode("utf-8"), f"turn {sent.turn}"
            assert got["parsed"] == json.loads(sent.body), f"turn {sent.turn}"


def _assert_streamed(stub: StubProvider, report: Json, stream_turns: tuple[int, ...]) -> None:
    """Every streamed answer reached the agent as a stream: its first event
    arrived while the stub was still holding the rest (the agent released it)."""
    assert stub.released == dict.fromkeys(stream_turns, True), (
        "the first event of every streamed answer must reach the agent "
        "before the stub writes the rest"
    )
    streams = [as_object(a) for a in as_list(report["answers"]) if as_object(a)["stream"]]
    assert [a["release_status"] for a in streams] == [200] * len(stream_turns)
    for answer in streams:
        raw = [as_object(piece) for piece in as_list(answer["raw"])]
        assert len(raw) > 1, "the stream came in one piece"


def _masked_lines(
    proxy: MitmdumpProcess, route: str, count: int, timeout: float = 10.0
) -> list[tuple[int, int]]:
    """The (masked, total) of mitmdump's "masked" lines, once ``count`` are there."""
    pattern = re.compile(rf"obsmask: POST {re.escape(route)}: masked (\d+) of (\d+) tool results")
    deadline = time.monotonic() + timeout
    while True:
        found = [
            (int(m.group(1)), int(m.group(2)))
            for line in list(proxy.lines)
            if (m := pattern.search(line))
        ]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _assert_log(proxy: MitmdumpProcess, route: str, expected: list[tuple[int, int]]) -> None:
    """mitmdump said what it did, and nothing went wrong in the addon."""
    assert _masked_lines(proxy, route, len(expected)) == expected
    output = proxy.output()
    assert "Traceback" not in output
    assert "internal error" not in output
    assert "forwarded unchanged" not in output


# The tests -----------------------------------------------------------------------


def test_anthropic_agent_over_12_tool_turns_gets_masked_requests_and_unchanged_answers(
    tmp_path: Path,
) -> None:
    """The real ``anthropic`` SDK through mitmdump, 12 tool turns (two with
    parallel ``tool_use`` blocks), three answers streamed: the provider sees
    exactly the client's bodies with old ``tool_result`` contents masked, the
    agent sees the provider's answers byte for byte, streams as streams.

    Kept whatever their age (keep_errors): the traceback, and the
    refusal sent with ``"is_error": true`` although its text reads as ordinary
    prose. The ``render_chart`` result, a list of two text blocks around a
    base64 PNG, keeps its image once old, its texts turned into one
    placeholder text block."""
    stub = AnthropicStub(tool_turns=TOOL_TURNS, release_wait=RELEASE_WAIT)
    with recording_server(stub) as server:
        arguments = _proxy_arguments(server.url, _empty_config(tmp_path))
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            proxy.wait_for(rf"conversation masking on: window {WINDOW_TURNS} tool turns")
            report = as_object(
                run_agent(
                    ANTHROPIC_AGENT,
                    f"http://127.0.0.1:{proxy.port}",
                    server.url,
                    TOOL_TURNS,
                    STREAM_TURNS,
                    proxy,
                )
            )
            posts = server.posts("/v1/messages")

            # The agent ran 12 tool turns on what the stub said, then stopped.
            final = [as_object(m) for m in as_list(report["final_messages"])]
            assistants = [m for m in final if m["role"] == "assistant"]
            assert [m["content"] for m in assistants] == [
                stub.content(turn) for turn in range(TOOL_TURNS + 1)
            ], "every answer, streamed or not, rebuilt whole (ids, inputs, texts)"
            assert [len(stub.calls(t)) for t in PARALLEL_TURNS] == [2, 2]
            assert set(PARALLEL_TURNS) & set(STREAM_TURNS)

            # The special results are what this test claims, and all get old.
            last_sent = as_list(as_object(as_list(report["requests"])[-1])["messages"])
            results = _anthropic_results(last_sent)
            assert len(results) == TOOL_TURNS + len(PARALLEL_TURNS)
            tracebacks = [
                r
                for r in results
                if isinstance(r.value, str) and r.value.endswith("ValueError: boom")
            ]
            flagged = [r for r in results if r.is_error]
            lists = [r for r in results if isinstance(r.value, list)]
            assert [(r.turn, r.tool) for r in tracebacks] == [(TRACEBACK_TURN, "run_tests")]
            assert [(r.turn, r.tool) for r in flagged] == [(DENIED_TURN, "read_file")]
            assert [(r.turn, r.tool) for r in lists] == [(CHART_TURN, "render_chart")]
            denied = as_str(flagged[0].value)
            assert not looks_like_error(denied), "only the flag may keep the refusal"
            assert 200 < len(denied) < 2000
            chart = [as_object(b) for b in as_list(lists[0].value)]
            assert [b["type"] for b in chart] == ["text", "image", "text"]
            assert as_str(as_object(chart[1]["source"])["data"]).startswith("iVBORw0KGgo")
            for r in results:
                if r not in tracebacks and r not in flagged:
                    assert 2000 <= len(_text_of(r.value)) <= 4000
                    assert not looks_like_error(_text_of(r.value)), r.call_id
            # Without its flag the refusal would be masked: the flag is what counts.
            unflagged = json.loads(json.dumps(last_sent))
            message, block = flagged[0].path
            del unflagged[message]["content"][block]["is_error"]
            assert _value_at(mask_items(unflagged, POLICY, ANTHROPIC), flagged[0].path) != denied

            # Every request: exactly the client's body, old results masked.
            def kept(result: Result) -> bool:
                return result.is_error or _text_of(result.value).endswith("ValueError: boom")

            lines, masked = _check_requests(report, posts, ANTHROPIC, _anthropic_results, kept)
            # Masking starts once a turn leaves the window, and really happens:
            # on the last request, every result of turns 0-8 but the two errors.
            assert masked[: WINDOW_TURNS + 1] == [0] * (WINDOW_TURNS + 1)
            assert all(masked[WINDOW_TURNS + 1 :])
            assert masked[-1] == (TOOL_TURNS - WINDOW_TURNS) + 1 - 2
            # The chart's fate, read on the last request, block by block.
            last_received = as_list(as_object(json.loads(posts[-1].body))["messages"])
            got = [as_object(b) for b in as_list(_value_at(last_received, lists[0].path))]
            assert [b["type"] for b in got] == ["text", "image"]
            assert got[1] == chart[1], "the image block goes through untouched"
            assert lists[0].call_id in as_str(got[0]["text"])

            # ... and on the first request where turn 3 is out of the window.
            def chart_at(request: int) -> object:
                messages = as_list(as_object(json.loads(posts[request].body))["messages"])
                return _value_at(messages, lists[0].path)

            old_from = CHART_TURN + WINDOW_TURNS + 1
            assert chart_at(old_from - 1) == lists[0].value
            assert chart_at(old_from) == chart_at(TOOL_TURNS) != lists[0].value

            # The agent got every answer unchanged, and the streams as streams.
            _assert_answers_unchanged(stub, report, skipped={"ping"})
            _assert_streamed(stub, report, STREAM_TURNS)
            _assert_log(proxy, "/v1/messages", lines)


def test_responses_agent_over_12_tool_turns_gets_masked_requests_and_unchanged_answers(
    tmp_path: Path,
) -> None:
    """The real ``openai`` SDK's Responses API through mitmdump, 12 tool turns
    (two with parallel ``function_call`` items), three answers streamed: the
    provider sees exactly the client's bodies with old ``function_call_output``
    outputs masked (the traceback kept), the agent sees the provider's answers
    byte for byte, streams as streams."""
    stub = ResponsesStub(tool_turns=TOOL_TURNS, release_wait=RELEASE_WAIT)
    with recording_server(stub) as server:
        arguments = _proxy_arguments(server.url, _empty_config(tmp_path))
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            proxy.wait_for(rf"conversation masking on: window {WINDOW_TURNS} tool turns")
            report = as_object(
                run_agent(
                    RESPONSES_AGENT,
                    f"http://127.0.0.1:{proxy.port}/v1",
                    server.url,
                    TOOL_TURNS,
                    STREAM_TURNS,
                    proxy,
                )
            )
            posts = server.posts("/v1/responses")

            # The agent ran 12 tool turns on what the stub said, then stopped:
            # its history holds every output item as the stub wrote it.
            final = [as_object(i) for i in as_list(report["final_items"])]
            model_items = [i for i in final if i.get("id")]
            assert model_items == [
                item for turn in range(TOOL_TURNS + 1) for item in stub.output(turn)
            ], "every answer, streamed or not, rebuilt whole (ids, call ids, arguments)"
            assert [len(stub.calls(t)) for t in PARALLEL_TURNS] == [2, 2]
            assert set(PARALLEL_TURNS) & set(STREAM_TURNS)

            last_sent = as_list(as_object(as_list(report["requests"])[-1])["input"])
            results = _responses_results(last_sent)
            assert len(results) == TOOL_TURNS + len(PARALLEL_TURNS)
            tracebacks = [r for r in results if as_str(r.value).endswith("ValueError: boom")]
            assert [(r.turn, r.tool) for r in tracebacks] == [(TRACEBACK_TURN, "run_tests")]
            for r in results:
                if r not in tracebacks:
                    assert 2000 <= len(as_str(r.value)) <= 4000
                    assert not looks_like_error(as_str(r.value)), r.call_id

            def kept(result: Result) -> bool:
                return as_str(result.value).endswith("ValueError: boom")

            lines, masked = _check_requests(report, posts, RESPONSES, _responses_results, kept)
            assert masked[: WINDOW_TURNS + 1] == [0] * (WINDOW_TURNS + 1)
            assert all(masked[WINDOW_TURNS + 1 :])
            # Last request: every result of turns 0-8 (10 with the parallel
            # turn 4) but the traceback.
            assert masked[-1] == (TOOL_TURNS - WINDOW_TURNS) + 1 - 1

            _assert_answers_unchanged(stub, report, skipped=set())
            _assert_streamed(stub, report, STREAM_TURNS)
            _assert_log(proxy, "/v1/responses", lines)


@pytest.mark.parametrize("api", ["anthropic", "responses"])
def test_stream_check_fails_when_mitmproxy_buffers_the_answer(tmp_path: Path, api: str) -> None:
    """The streaming checks above can fail: with obsmask_stream_responses=false
    mitmproxy holds the SSE answer until it is complete, so the agent cannot
    release the stub before its wait runs out (and still gets every byte).
    One streamed tool turn, then the final answer."""
    wait = 2.0
    stub: StubProvider
    if api == "anthropic":
        stub, agent, base = AnthropicStub(1, wait), ANTHROPIC_AGENT, ""
    else:
        stub, agent, base = ResponsesStub(1, wait), RESPONSES_AGENT, "/v1"
    with recording_server(stub) as server:
        arguments = _proxy_arguments(
            server.url, _empty_config(tmp_path), "--set", "obsmask_stream_responses=false"
        )
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            report = as_object(
                run_agent(agent, f"http://127.0.0.1:{proxy.port}{base}", server.url, 1, (0,), proxy)
            )
            assert len(server.posts(stub.path)) == 2
            assert stub.released == {0: False}
            first = as_object(as_list(as_object(as_list(report["answers"])[0])["raw"])[0])
            assert isinstance(first["at"], float) and first["at"] >= wait * 0.9, (
                "buffered: nothing before the stub's timeout"
            )
            _assert_answers_unchanged(stub, report, skipped={"ping"})
            assert "internal error" not in proxy.output()


def _stub_answer(stub: StubProvider, request: Json) -> list[Json]:
    """The JSON answer, or the data of each SSE event, of ``stub`` to
    ``request``, called in process."""
    answer = stub(Recorded("POST", stub.path, {}, json.dumps(request).encode()))
    assert answer.status == 200
    if isinstance(answer.body, bytes):
        return [as_object(json.loads(answer.body))]
    raw = b"".join(c for c in answer.body if isinstance(c, bytes))
    return [as_object(json.loads(line[6:])) for line in raw.split(b"\n")
            if line.startswith(b"data: ")]


def test_the_stubs_given_a_prompt_cache_report_its_usage() -> None:
    """With a cache (tests/support/caching_provider.py): the Responses stub
    reports the input it shares with the request before as cached tokens;
    the Anthropic stub reports the cache's read and write, in its stream's
    message_start and (cumulative) message_delta too, and refuses a fifth
    breakpoint with HTTP 400."""
    responses_cache = OpenAIPromptCache("input")
    responses = ResponsesStub(1, 0.0, cache=responses_cache)
    items: list[object] = [{"role": "user", "content": "x" * 6000}]
    _stub_answer(responses, {"model": "m", "input": items})
    second = _stub_answer(responses, {"model": "m", "input": [*items, {"role": "user",
                                                                       "content": "more"}]})
    usage = as_object(second[0]["usage"])
    assert usage == responses_cache.bills[1].responses_usage(17)
    assert as_object(usage["input_tokens_details"])["cached_tokens"] == 1408

    anthropic_cache = AnthropicPromptCache()
    anthropic = AnthropicStub(1, 0.0, cache=anthropic_cache)
    block: Json = {"type": "text", "text": "x" * 6000, "cache_control": {"type": "ephemeral"}}
    first = {"model": "m", "messages": [{"role": "user", "content": [block]}]}
    _stub_answer(anthropic, first)
    events = _stub_answer(anthropic, {**first, "stream": True})
    bill = anthropic_cache.bills[1]
    assert bill.cache_read_input_tokens == anthropic_cache.bills[0].total_tokens > 0
    start = as_object(as_object(events[0]["message"])["usage"])
    delta = next(as_object(e["usage"]) for e in events if e["type"] == "message_delta")
    assert (start, delta) == ({**bill.usage(17), "output_tokens": 1}, bill.usage(17))
    five = {"model": "m", "messages": [{"role": "user", "content": [block] * 5}]}
    refused = anthropic(Recorded("POST", anthropic.path, {}, json.dumps(five).encode()))
    assert refused.status == 400 and isinstance(refused.body, bytes)
    assert b"Found 5." in refused.body
