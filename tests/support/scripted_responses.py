"""A scripted OpenAI Responses server on 127.0.0.1, for driving a real agent
program (the Codex CLI) through a fixed task with no model.

It answers ``POST .../responses`` (any prefix: Codex posts to its base URL
followed by ``/responses``) the way the real API does: streamed, when the
request sets ``"stream": true`` (server-sent events, each an ``event:`` line
and one ``data:`` line with a ``sequence_number``: ``response.created`` and
``response.in_progress`` with the response in progress; for each output
item ``response.output_item.added``, then for a message
``response.content_part.added``, ``response.output_text.delta`` pieces,
``response.output_text.done``, ``response.content_part.done``, and for a
function call ``response.function_call_arguments.delta`` pieces and
``response.function_call_arguments.done``; ``response.output_item.done``
with the whole item; and ``response.completed`` with the output and the
usage), or as one ``response`` object when it does not. Codex 0.171 reads
the items of ``response.output_item.done`` and needs ``response.completed``
(with the response's ``id``, and its ``usage``) before the stream ends; a
stream that ends without it is an error it retries.

The conversation of the task (the requests whose user messages hold the
task's prompt marker and that offer a shell tool) follows the script:
answer number N is a short message and a call of the shell tool with
``commands[N]``, and the answer after the last command is the final text.
The shell tool is found in the request's ``tools``: ``exec_command`` (Codex's
unified exec: ``{"cmd": ...}``), else ``shell`` (``{"command": [argv]}``),
else any function whose parameters require ``cmd`` or ``command``. N is read
from the request itself (how many of the script's ``function_call`` items
its ``input`` already holds), so a retried request gets the same content.
Any other request for a response (a title, a summary...) gets a short text.

Other requests, each recorded:

- a WebSocket upgrade (``GET .../responses`` with ``Upgrade: websocket``,
  which Codex's built-in ``openai`` provider tries first) gets HTTP 426
  Upgrade Required, as a server without the Responses WebSocket transport
  answers: Codex then falls back to HTTP at once (a 404 makes it retry the
  upgrade five times, with backoff, for about 7 seconds first);
- ``GET .../models`` gets an empty list (Codex keeps its own catalog);
- anything else a 404 in the API's error format;
- past ``max_requests`` requests, every request gets a 400 (an agent that
  loops ends instead of running until its time-out).

The usage reported in ``response.completed`` is computed from the bytes
received, like a provider with a prompt cache: ``input_tokens`` is the
body's length / 4, ``input_tokens_details.cached_tokens`` the longest prefix
the body shares with an earlier request of the task, / 4, rounded down to
128-token steps (nothing under 1,024 tokens). A masked body therefore costs
fewer tokens. Each answer carries an ``x-request-id`` header
(``Served.request_id``), which names it in mitmproxy's flows. Every request
is recorded, raw body included, by the ``RecordingServer`` underneath.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from support.json_values import as_list, as_object
from support.recording_server import Answer, Recorded, RecordingServer, common_prefix_length

Json = dict[str, object]

BYTES_PER_TOKEN = 4
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
OUTPUT_TOKENS = 21
CREATED = 1_796_000_000
OTHER_TEXT = "Scripted side answer."
# Far more than a scripted task needs: a bound on an agent that loops.
MAX_REQUESTS = 200


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _pieces(text: str, count: int) -> list[str]:
    """``text`` cut into at most ``count`` non-empty pieces."""
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


@dataclass(frozen=True)
class ShellTool:
    """The agent's shell tool as the request declares it."""

    name: str
    argument: str  # "cmd" or "command"
    argv: bool  # the command as a list of strings (["bash", "-lc", ...])

    def arguments(self, command: str) -> str:
        value: object = ["bash", "-lc", command] if self.argv else command
        return _compact({self.argument: value})


def shell_tool(tools: object) -> ShellTool | None:
    """The shell-running function of a request's ``tools``, if offered:
    ``exec_command``, else ``shell``, else the first function whose
    parameters require ``cmd`` or ``command``."""
    if not isinstance(tools, list):
        return None
    found: list[tuple[int, ShellTool]] = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue
        parameters = tool.get("parameters")
        if not isinstance(parameters, dict):
            continue
        properties = parameters.get("properties")
        required = parameters.get("required")
        if not isinstance(properties, dict) or not isinstance(required, list):
            continue
        for argument in ("cmd", "command"):
            if argument in required:
                schema = properties.get(argument)
                argv = isinstance(schema, dict) and schema.get("type") == "array"
                name = str(tool.get("name"))
                rank = {"exec_command": 0, "shell": 1}.get(name, 2)
                found.append((rank, ShellTool(name, argument, argv)))
                break
    return min(found, key=lambda pair: pair[0])[1] if found else None


def _user_texts(items: list[object]) -> str:
    """The text of every user message of a Responses ``input``."""
    texts = []
    for item in items:
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "\n".join(texts)


@dataclass(frozen=True)
class Step:
    """One answer of the task's conversation."""

    number: int
    command: str | None  # the shell command called, or None: the final text

    @property
    def call_id(self) -> str:
        return f"call_scripted{self.number:04d}"

    def text(self, final_text: str) -> str:
        if self.command is None:
            return final_text
        return f"Step {self.number + 1}: I run `{self.command}`."


@dataclass
class Served:
    """What the server made of one request."""

    # "task", "other", "websocket", "models", "unknown", "over_limit"
    kind: str
    recorded: Recorded
    stream: bool
    step: int | None  # the script's step answered, for "task"
    usage: Json | None  # the usage it reported, for a response
    request_id: str = ""  # its ``x-request-id`` header: req_scripted + 10 digits


class ScriptedResponses:
    """The responder (and its recording server): see the module docstring."""

    def __init__(self, prompt_marker: str, commands: Sequence[str], final_text: str,
                 *, max_requests: int = MAX_REQUESTS) -> None:
        self.prompt_marker = prompt_marker
        self.commands = list(commands)
        self.final_text = final_text
        self.max_requests = max_requests
        self.served: list[Served] = []
        self._task_bodies: list[bytes] = []
        self._lock = threading.Lock()
        self.server = RecordingServer(self)

    @property
    def url(self) -> str:
        return self.server.url

    # What the agent sends ------------------------------------------------------

    def steps(self) -> list[Step]:
        return [Step(n, c) for n, c in enumerate(self.commands)] + [Step(len(self.commands), None)]

    def step_of(self, items: list[object]) -> int:
        """How many of the script's calls the conversation holds."""
        ours = {s.call_id for s in self.steps()}
        done = {
            item.get("call_id")
            for item in items
            if isinstance(item, dict) and item.get("type") == "function_call"
            and item.get("call_id") in ours
        }
        return min(len(done), len(self.commands))

    def task(self) -> list[Served]:
        """The requests of the task's conversation, in order."""
        with self._lock:
            return [s for s in self.served if s.kind == "task"]

    def others(self) -> list[Served]:
        """Every request that is not one of the task's."""
        with self._lock:
            return [s for s in self.served if s.kind != "task"]

    # Answers -------------------------------------------------------------------

    def __call__(self, recorded: Recorded) -> Answer:
        with self._lock:
            over = len(self.served) >= self.max_requests
        if over:
            return self._error(recorded, "over_limit", 400,
                               f"scripted server: more than {self.max_requests} requests")
        path = urlsplit(recorded.path).path.rstrip("/")
        if recorded.headers.get("upgrade", "").lower() == "websocket":
            return self._error(recorded, "websocket", 426,
                               "scripted server: no Responses WebSocket transport, use HTTP")
        if recorded.method == "GET" and path.endswith("/models"):
            request_id = self._add(Served("models", recorded, False, None, None))
            listing = {"object": "list", "data": []}
            return Answer(headers={"content-type": "application/json",
                                   "x-request-id": request_id},
                          body=_compact(listing).encode())
        if recorded.method != "POST" or not path.endswith("/responses"):
            return self._error(recorded, "unknown", 404,
                               f"Unknown request URL: {recorded.method} {recorded.path}")
        try:
            request = json.loads(recorded.body)
        except ValueError:
            request = None
        if not isinstance(request, dict) or not isinstance(request.get("input"), list):
            return self._error(recorded, "unknown", 400, "'input' is a required property")
        items = request["input"]
        stream = request.get("stream") is True
        tool = shell_tool(request.get("tools"))
        is_task = tool is not None and self.prompt_marker in _user_texts(items)
        usage = self._usage(recorded.body, is_task)
        if is_task:
            assert tool is not None
            step = self.steps()[self.step_of(items)]
            request_id = self._add(Served("task", recorded, stream, step.number, usage))
            output = self._output(step, tool, request_id)
        else:
            request_id = self._add(Served("other", recorded, stream, None, usage))
            output = [self._message(request_id, OTHER_TEXT)]
        response = self._response(request, request_id, "completed", output, usage)
        headers = {"x-request-id": request_id}
        if not stream:
            return Answer(headers={"content-type": "application/json", **headers},
                          body=_compact(response).encode())
        return Answer(
            headers={"content-type": "text/event-stream; charset=utf-8",
                     "cache-control": "no-cache", **headers},
            body=list(sse_bytes(self._events(response))),
        )

    def _add(self, served: Served) -> str:
        """Record ``served``; the request id of its answer."""
        with self._lock:
            self.served.append(served)
            served.request_id = f"req_scripted{len(self.served):010d}"
            return served.request_id

    def _error(self, recorded: Recorded, kind: str, status: int, message: str) -> Answer:
        request_id = self._add(Served(kind, recorded, False, None, None))
        body = {"error": {"message": message, "type": "invalid_request_error",
                          "param": None, "code": None}}
        return Answer(status=status,
                      headers={"content-type": "application/json", "x-request-id": request_id},
                      body=_compact(body).encode())

    def _usage(self, body: bytes, is_task: bool) -> Json:
        with self._lock:
            shared = max((common_prefix_length(body, b) for b in self._task_bodies), default=0)
            if is_task:
                self._task_bodies.append(body)
        prompt = max(1, len(body) // BYTES_PER_TOKEN)
        cached = shared // BYTES_PER_TOKEN
        cached = 0 if cached < CACHE_MIN_TOKENS else cached - cached % CACHE_STEP_TOKENS
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": OUTPUT_TOKENS,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + OUTPUT_TOKENS,
        }

    # The response and its events -------------------------------------------------

    @staticmethod
    def _message(request_id: str, text: str) -> Json:
        return {
            "id": request_id.replace("req_", "msg_"),
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        }

    def _output(self, step: Step, tool: ShellTool, request_id: str) -> list[Json]:
        message = self._message(request_id, step.text(self.final_text))
        if step.command is None:
            return [message]
        call: Json = {
            "id": request_id.replace("req_", "fc_"),
            "type": "function_call",
            "status": "completed",
            "arguments": tool.arguments(step.command),
            "call_id": step.call_id,
            "name": tool.name,
        }
        return [message, call]

    @staticmethod
    def _response(request: Json, request_id: str, status: str, output: list[Json],
                  usage: Json | None) -> Json:
        return {
            "id": request_id.replace("req_", "resp_"),
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": request.get("instructions"),
            "max_output_tokens": None,
            "model": request.get("model", "scripted"),
            "output": output,
            "parallel_tool_calls": request.get("parallel_tool_calls", True),
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": request.get("store", False),
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": request.get("tool_choice", "auto"),
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "metadata": {},
        }

    @staticmethod
    def _events(response: Json) -> list[Json]:
        output = [as_object(item) for item in as_list(response["output"])]
        under_way = {**response, "status": "in_progress", "output": [], "usage": None}
        events: list[Json] = [
            {"type": "response.created", "response": under_way},
            {"type": "response.in_progress", "response": under_way},
        ]
        for index, item in enumerate(output):
            item_id = item["id"]
            if item["type"] == "message":
                part = as_object(as_list(item["content"])[0])
                events.append({"type": "response.output_item.added", "output_index": index,
                               "item": {**item, "status": "in_progress", "content": []}})
                events.append({"type": "response.content_part.added", "item_id": item_id,
                               "output_index": index, "content_index": 0,
                               "part": {**part, "text": ""}})
                for piece in _pieces(str(part["text"]), 3):
                    events.append({"type": "response.output_text.delta", "item_id": item_id,
                                   "output_index": index, "content_index": 0,
                                   "delta": piece, "logprobs": []})
                events.append({"type": "response.output_text.done", "item_id": item_id,
                               "output_index": index, "content_index": 0,
                               "text": part["text"], "logprobs": []})
                events.append({"type": "response.content_part.done", "item_id": item_id,
                               "output_index": index, "content_index": 0, "part": part})
            else:
                events.append({"type": "response.output_item.added", "output_index": index,
                               "item": {**item, "status": "in_progress", "arguments": ""}})
                for piece in _pieces(str(item["arguments"]), 3):
                    events.append({"type": "response.function_call_arguments.delta",
                                   "item_id": item_id, "output_index": index, "delta": piece})
                events.append({"type": "response.function_call_arguments.done",
                               "item_id": item_id, "output_index": index,
                               "arguments": item["arguments"]})
            events.append({"type": "response.output_item.done", "output_index": index,
                           "item": item})
        events.append({"type": "response.completed", "response": response})
        return [{**event, "sequence_number": number} for number, event in enumerate(events)]


def sse_bytes(events: Sequence[Json]) -> list[bytes]:
    """Each event as the API writes it: ``event:`` line, one ``data:`` line."""
    return [f"event: {e['type']}\ndata: {_compact(e)}\n\n".encode() for e in events]


@contextmanager
def scripted_responses(
    prompt_marker: str, commands: Sequence[str], final_text: str,
    *, max_requests: int = MAX_REQUESTS,
) -> Iterator[ScriptedResponses]:
    """A running scripted server; stopped on exit, whatever happened."""
    scripted = ScriptedResponses(prompt_marker, commands, final_text, max_requests=max_requests)
    scripted.server.start()
    try:
        yield scripted
    finally:
        scripted.server.stop()
