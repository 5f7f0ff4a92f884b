"""A scripted Anthropic Messages server on 127.0.0.1, for driving a real
agent program (Claude Code) through a fixed task with no model.

It answers ``POST /v1/messages`` (any query, e.g. Claude Code's
``?beta=true``) the way the real API does, streamed (SSE: ``message_start``
with the usage, ``ping``, ``content_block_start`` / ``content_block_delta`` /
``content_block_stop`` for each text and ``tool_use`` block, the tool input
as ``input_json_delta`` pieces, ``message_delta`` with the stop reason and
the usage, ``message_stop``) or as one JSON message when ``stream`` is not
set.

The conversation of the task (the requests whose first user message holds the
task's prompt) follows the script: answer number N calls the agent's shell
tool with ``commands[N]`` (the tool found in the request's ``tools``: the one
named ``Bash``, or else the one whose input schema requires ``command``), and
the answer after the last command is the final text. The number N is read from
the request itself (how many of the script's ``tool_use`` blocks it already
holds), so a retried request gets the same content. Any other message request
(a title, a topic, a summary...) gets a short text;
``POST /v1/messages/count_tokens`` gets an estimate; anything else a 404 in
the API's error format. Every request is recorded, raw body included, by the
``RecordingServer`` underneath.

The usage it reports (in ``message_start``, and again, cumulative, in
``message_delta``, as the API does now) is computed from what it received,
with a rough model of a provider's prompt cache: the prompt is read in the
order the provider caches it (``tools``, ``system``, ``messages``, compact
JSON, 4 bytes a token); the longest prefix it shares with an earlier request
of the task is read from the cache, the rest but a few tokens is written to
it. A masked body therefore costs fewer tokens, and a prefix that changes
shows up as cache writes. Each answer carries a ``request-id`` header
(``Served.request_id``), which names it in mitmproxy's flows.

With ``cache`` (an ``AnthropicPromptCache`` of tests/support/caching_provider.py,
the prompt cache as Anthropic documents it: breakpoints, 20-block lookback,
minimum, lifetimes) the usage of every message request, of the task or not,
comes from that cache instead, and ``Served.bill`` keeps what it read, wrote
and cost (``cache.bills`` has them all, in order). A request the API would
refuse (a fifth breakpoint, a ``cache_control`` on a thinking block) gets
the API's HTTP 400 and is served as ``"invalid"``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from support.caching_provider import AnthropicBill, AnthropicPromptCache, InvalidRequest
from support.recording_server import Answer, Recorded, RecordingServer, common_prefix_length

Json = dict[str, object]

BYTES_PER_TOKEN = 4
# Tokens after the last cache breakpoint that a provider bills as plain input.
UNCACHED_TAIL_TOKENS = 3
OUTPUT_TOKENS = 25
OTHER_TEXT = "Scripted side answer."


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _pieces(text: str, count: int) -> list[str]:
    """``text`` cut into ``count`` pieces (the last ones may be empty)."""
    size = max(1, -(-len(text) // count))
    return [text[i * size : (i + 1) * size] for i in range(count)]


def sse_bytes(events: Sequence[Json]) -> list[bytes]:
    """Each event as the API writes it: ``event:`` line, one ``data:`` line."""
    return [f"event: {e['type']}\ndata: {_compact(e)}\n\n".encode() for e in events]


def shell_tool(tools: object) -> tuple[str, set[str]] | None:
    """The name and input properties of the agent's shell tool, if offered."""
    if not isinstance(tools, list):
        return None
    candidates = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            continue
        properties = schema.get("properties")
        required = schema.get("required")
        if isinstance(properties, dict) and isinstance(required, list) and "command" in required:
            candidates.append((tool.get("name") != "Bash", str(tool.get("name")), set(properties)))
    if not candidates:
        return None
    _, name, properties = min(candidates)
    return name, properties


def _first_user_text(messages: list[object]) -> str:
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            return ""
    return ""


def _prompt_bytes(request: Json) -> bytes:
    """The prompt in the order a provider caches it."""
    parts = [request.get("tools"), request.get("system"), request.get("messages")]
    return _compact(parts).encode()


@dataclass(frozen=True)
class Step:
    """One answer of the task's conversation."""

    number: int
    command: str | None  # the shell command called, or None: the final text

    @property
    def tool_use_id(self) -> str:
        return f"toolu_01Scripted{self.number:010d}"

    def text(self, final_text: str) -> str:
        if self.command is None:
            return final_text
        return f"Step {self.number + 1}: I run `{self.command}`."


@dataclass
class Served:
    """What the server made of one request."""

    kind: str  # "task", "other", "count_tokens", "unknown", "invalid" (refused by the cache)
    recorded: Recorded
    stream: bool
    step: int | None  # the script's step answered, for "task"
    usage: Json | None  # the usage it reported, for a message
    request_id: str = ""  # its ``request-id`` header: req_01Scripted + 10 digits
    bill: AnthropicBill | None = None  # with a cache: what it read, wrote and cost


class ScriptedAnthropic:
    """The responder (and its recording server): see the module docstring."""

    def __init__(self, prompt_marker: str, commands: Sequence[str], final_text: str,
                 *, cache: AnthropicPromptCache | None = None) -> None:
        self.prompt_marker = prompt_marker
        self.cache = cache
        self.commands = list(commands)
        self.final_text = final_text
        self.served: list[Served] = []
        self._task_prompts: list[bytes] = []
        self._lock = threading.Lock()
        self.server = RecordingServer(self)

    @property
    def url(self) -> str:
        return self.server.url

    # What the agent sends ------------------------------------------------------

    def steps(self) -> list[Step]:
        return [Step(n, c) for n, c in enumerate(self.commands)] + [Step(len(self.commands), None)]

    def step_of(self, messages: list[object]) -> int:
        """How many of the script's tool calls the conversation holds."""
        ours = {s.tool_use_id for s in self.steps()}
        done = set()
        for message in messages:
            if isinstance(message, dict) and message.get("role") == "assistant":
                content = message.get("content")
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, dict) and block.get("id") in ours:
                        done.add(block["id"])
        return min(len(done), len(self.commands))

    def task(self) -> list[Served]:
        """The requests of the task's conversation, in order."""
        with self._lock:
            return [s for s in self.served if s.kind == "task"]

    def others(self) -> list[Served]:
        with self._lock:
            return [s for s in self.served if s.kind != "task"]

    # Answers -------------------------------------------------------------------

    def __call__(self, recorded: Recorded) -> Answer:
        path = urlsplit(recorded.path).path
        if recorded.method == "POST" and path == "/v1/messages/count_tokens":
            tokens = max(1, len(recorded.body) // BYTES_PER_TOKEN)
            self._add(Served("count_tokens", recorded, False, None, None))
            return Answer(body=_compact({"input_tokens": tokens}).encode())
        if recorded.method != "POST" or path != "/v1/messages":
            self._add(Served("unknown", recorded, False, None, None))
            error = {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}}
            return Answer(status=404, body=_compact(error).encode())
        try:
            request = json.loads(recorded.body)
        except ValueError:
            request = None
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            self._add(Served("unknown", recorded, False, None, None))
            error = {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "messages: required"},
            }
            return Answer(status=400, body=_compact(error).encode())
        messages = request["messages"]
        stream = request.get("stream") is True
        tool = shell_tool(request.get("tools"))
        is_task = tool is not None and self.prompt_marker in _first_user_text(messages)
        bill = None
        if self.cache is not None:
            try:
                bill = self.cache.bill(request)
            except InvalidRequest as refused:
                request_id = self._add(Served("invalid", recorded, stream, None, None))
                return Answer(status=400,
                              headers={"content-type": "application/json",
                                       "request-id": request_id},
                              body=_compact(refused.body()).encode())
            usage = bill.usage(OUTPUT_TOKENS)
        else:
            usage = self._usage(_prompt_bytes(request), is_task)
        if is_task:
            assert tool is not None
            step = self.steps()[self.step_of(messages)]
            content = self._content(step, tool)
            stop = "end_turn" if step.command is None else "tool_use"
            request_id = self._add(Served("task", recorded, stream, step.number, usage,
                                          bill=bill))
        else:
            content = [{"type": "text", "text": OTHER_TEXT}]
            stop = "end_turn"
            request_id = self._add(Served("other", recorded, stream, None, usage, bill=bill))
        message: Json = {
            "id": request_id.replace("req_", "msg_"),
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "claude-scripted"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        headers = {"request-id": request_id}
        if not stream:
            return Answer(
                headers={"content-type": "application/json", **headers},
                body=_compact(message).encode(),
            )
        return Answer(
            headers={"content-type": "text/event-stream; charset=utf-8", **headers},
            body=list(sse_bytes(self._events(message))),
        )

    def _add(self, served: Served) -> str:
        """Record ``served``; the request id of its answer."""
        with self._lock:
            self.served.append(served)
            served.request_id = f"req_01Scripted{len(self.served):010d}"
            return served.request_id

    def _usage(self, prompt: bytes, is_task: bool) -> Json:
        with self._lock:
            earlier = list(self._task_prompts)
            if is_task:
                self._task_prompts.append(prompt)
        cached = max((common_prefix_length(prompt, e) for e in earlier), default=0)
        total = max(1, len(prompt) // BYTES_PER_TOKEN)
        read = cached // BYTES_PER_TOKEN
        plain = min(UNCACHED_TAIL_TOKENS, total - read)
        return {
            "input_tokens": plain,
            "cache_creation_input_tokens": total - read - plain,
            "cache_read_input_tokens": read,
            "output_tokens": OUTPUT_TOKENS,
            "service_tier": "standard",
        }

    def _content(self, step: Step, tool: tuple[str, set[str]]) -> list[Json]:
        text: Json = {"type": "text", "text": step.text(self.final_text)}
        if step.command is None:
            return [text]
        name, properties = tool
        arguments: Json = {"command": step.command}
        if "description" in properties:
            arguments["description"] = f"Scripted step {step.number + 1}"
        use: Json = {"type": "tool_use", "id": step.tool_use_id, "name": name, "input": arguments}
        return [text, use]

    @staticmethod
    def _events(message: Json) -> list[Json]:
        usage = message["usage"]
        assert isinstance(usage, dict)
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**usage, "output_tokens": 1},
        }
        events: list[Json] = [
            {"type": "message_start", "message": start},
            {"type": "ping"},
        ]
        content = message["content"]
        assert isinstance(content, list)
        for index, block in enumerate(content):
            if block["type"] == "text":
                events.append(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    }
                )
                for piece in _pieces(block["text"], 3):
                    events.append(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        }
                    )
            else:
                events.append(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {**block, "input": {}},
                    }
                )
                for piece in ["", *_pieces(_compact(block["input"]), 3)]:
                    events.append(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        }
                    )
            events.append({"type": "content_block_stop", "index": index})
        events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": usage,
            }
        )
        events.append({"type": "message_stop"})
        return events


@contextmanager
def scripted_anthropic(
    prompt_marker: str, commands: Sequence[str], final_text: str,
    *, cache: AnthropicPromptCache | None = None,
) -> Iterator[ScriptedAnthropic]:
    """A running scripted server (its usage from ``cache``, when given);
    stopped on exit, whatever happened."""
    scripted = ScriptedAnthropic(prompt_marker, commands, final_text, cache=cache)
    scripted.server.start()
    try:
        yield scripted
    finally:
        scripted.server.stop()
