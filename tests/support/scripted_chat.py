"""A scripted OpenAI Chat Completions server on 127.0.0.1, for driving a real
agent program (mini-swe-agent) through a fixed task with no model.

It answers ``POST .../chat/completions`` the way the real API does: one JSON
``chat.completion`` when the request does not ask to stream, or, with
``"stream": true``, server-sent events: ``chat.completion.chunk`` objects
whose ``delta`` carries the role, the text in pieces, then the tool call (its
``id``, ``type`` and name first, the ``arguments`` in pieces), a last choice
chunk with the ``finish_reason``, and, when ``stream_options.include_usage``
is set, a chunk with no choices and the ``usage`` (every chunk before it then
has ``"usage": null``, as OpenAI writes them), then ``data: [DONE]``.

The script is a list of steps, each a thought and one command for the
agent's shell tool (the tool of the request's ``tools`` whose parameters
require ``command``). Answer number N plays step N; N is read from the
request itself (how many assistant messages with ``tool_calls`` it already
holds), so a retried request gets the same answer. After the last step the
answer is a short text with no tool call. Anything else gets a 404 in the
API's error format. Every request is recorded, raw body included, by the
``RecordingServer`` underneath.

The usage it reports is computed from the bytes received, like a provider
with a prompt cache: ``prompt_tokens`` is the body's length / 4, and
``prompt_tokens_details.cached_tokens`` the longest prefix the body shares
with an earlier request, / 4, rounded down to OpenAI's 128-token steps
(nothing under 1,024 tokens). A masked body therefore costs fewer tokens,
and a prefix that changes shows up as fewer cached tokens.

With ``cache`` (an ``OpenAIPromptCache("messages")`` of
tests/support/caching_provider.py) the usage comes from that cache instead:
its token estimate, the longest prefix of whole messages shared with an
earlier request to the same model, and ``SentAnswer.bill`` keeps the figures
(``cache.bills`` has them all, in order).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from support.caching_provider import OpenAIBill, OpenAIPromptCache
from support.recording_server import Answer, Recorded, RecordingServer, common_prefix_length

Json = dict[str, object]

BYTES_PER_TOKEN = 4
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
CREATED = 1_700_000_000
FINGERPRINT = "fp_scripted"
COMPLETION_TOKENS = 23
FINAL_TEXT = "The script has no more steps."


@dataclass(frozen=True)
class Step:
    """One answer of the scripted model: a thought and one shell command."""

    thought: str
    command: str


@dataclass
class SentAnswer:
    """What the server answered to one request."""

    turn: int
    stream: bool
    usage: Json | None
    body: bytes = b""  # the JSON answer, or the whole SSE stream as written
    bill: OpenAIBill | None = None  # with a cache: what it shared and had cached


def _pieces(text: str, count: int) -> list[str]:
    """``text`` cut into at most ``count`` non-empty pieces."""
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _tool_name(request: Json) -> str:
    """The shell tool of the request: the function whose parameters require
    ``command`` (mini-swe-agent's ``bash``)."""
    for tool in request.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            required = (function.get("parameters") or {}).get("required") or []
            if "command" in required:
                return str(function["name"])
    return "bash"


class ScriptedChat:
    """The responder of a ``RecordingServer``: plays ``steps``."""

    def __init__(self, steps: Sequence[Step], *, id_prefix: str = "call_scripted",
                 cache: OpenAIPromptCache | None = None) -> None:
        self.steps = list(steps)
        self.id_prefix = id_prefix
        self.cache = cache
        self.sent: list[SentAnswer] = []
        self._bodies: list[bytes] = []
        self._lock = threading.Lock()

    def call_id(self, turn: int) -> str:
        return f"{self.id_prefix}{turn:02d}"

    def __call__(self, recorded: Recorded) -> Answer:
        path = recorded.path.split("?", 1)[0]
        if recorded.method != "POST" or not path.endswith("/chat/completions"):
            return self._error(404, f"Unknown request URL: {recorded.method} {path}")
        try:
            request = json.loads(recorded.body)
        except ValueError:
            return self._error(400, "We could not parse the JSON body of your request.")
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return self._error(400, "'messages' is a required property")
        turn = sum(
            1
            for m in request["messages"]
            if isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls")
        )
        bill = self.cache.bill(request) if self.cache is not None else None
        usage = (bill.chat_usage(COMPLETION_TOKENS) if bill is not None
                 else self._usage(recorded.body))
        if request.get("stream"):
            with_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            reported = usage if with_usage else None
            events: list[bytes] = list(self._events(turn, request, reported))
            with self._lock:
                self.sent.append(SentAnswer(turn, True, reported, b"".join(events), bill))
            return Answer(
                headers={"content-type": "text/event-stream; charset=utf-8",
                         "cache-control": "no-cache"},
                body=list(events),
            )
        body = json.dumps(self._completion(turn, request, usage)).encode()
        with self._lock:
            self.sent.append(SentAnswer(turn, False, usage, body, bill))
        return Answer(body=body)

    # The answers ------------------------------------------------------------

    def _head(self, turn: int, request: Json, kind: str) -> Json:
        return {
            "id": f"chatcmpl-scripted-{turn:02d}",
            "object": kind,
            "created": CREATED + turn,
            "model": request.get("model", "scripted"),
            "service_tier": "default",
            "system_fingerprint": FINGERPRINT,
        }

    def _completion(self, turn: int, request: Json, usage: Json) -> Json:
        message: Json = {"role": "assistant", "refusal": None, "annotations": []}
        if turn < len(self.steps):
            step = self.steps[turn]
            message["content"] = step.thought
            message["tool_calls"] = [{
                "id": self.call_id(turn),
                "type": "function",
                "function": {"name": _tool_name(request),
                             "arguments": json.dumps({"command": step.command})},
            }]
            finish = "tool_calls"
        else:
            message["content"] = FINAL_TEXT
            finish = "stop"
        return {
            **self._head(turn, request, "chat.completion"),
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish}],
            "usage": usage,
        }

    def _events(self, turn: int, request: Json, usage: Json | None) -> Iterator[bytes]:
        head = self._head(turn, request, "chat.completion.chunk")
        with_usage = usage is not None

        def chunk(delta: Json, finish: str | None = None) -> bytes:
            data: Json = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                               "finish_reason": finish}]}
            if with_usage:
                data["usage"] = None
            return f"data: {json.dumps(data)}\n\n".encode()

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        if turn < len(self.steps):
            step = self.steps[turn]
            for piece in _pieces(step.thought, 3):
                yield chunk({"content": piece})
            yield chunk({"tool_calls": [{
                "index": 0, "id": self.call_id(turn), "type": "function",
                "function": {"name": _tool_name(request), "arguments": ""},
            }]})
            for piece in _pieces(json.dumps({"command": step.command}), 3):
                yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            yield chunk({}, "tool_calls")
        else:
            for piece in _pieces(FINAL_TEXT, 3):
                yield chunk({"content": piece})
            yield chunk({}, "stop")
        if usage is not None:
            yield f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n".encode()
        yield b"data: [DONE]\n\n"

    def _usage(self, body: bytes) -> Json:
        with self._lock:
            shared = max((common_prefix_length(body, b) for b in self._bodies), default=0)
            self._bodies.append(body)
        prompt = len(body) // BYTES_PER_TOKEN
        cached = shared // BYTES_PER_TOKEN
        cached = 0 if cached < CACHE_MIN_TOKENS else cached - cached % CACHE_STEP_TOKENS
        return {
            "prompt_tokens": prompt,
            "completion_tokens": COMPLETION_TOKENS,
            "total_tokens": prompt + COMPLETION_TOKENS,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    @staticmethod
    def _error(status: int, message: str) -> Answer:
        body = {"error": {"message": message, "type": "invalid_request_error",
                          "param": None, "code": None}}
        return Answer(status=status, body=json.dumps(body).encode())


@dataclass
class ScriptedChatServer:
    """A running scripted server: its address, script and records."""

    server: RecordingServer
    script: ScriptedChat
    url: str = field(init=False)

    def __post_init__(self) -> None:
        self.url = self.server.url

    def bodies(self) -> list[bytes]:
        """The raw bodies of the chat requests, in the order received."""
        return [r.body for r in self.server.posts("/chat/completions")]


@contextmanager
def scripted_chat_server(steps: Sequence[Step], *, cache: OpenAIPromptCache | None = None,
                         **options: str) -> Iterator[ScriptedChatServer]:
    """A running scripted server (its usage from ``cache``, when given);
    stopped on exit, whatever happened."""
    script = ScriptedChat(steps, cache=cache, **options)
    server = RecordingServer(script)
    server.start()
    try:
        yield ScriptedChatServer(server, script)
    finally:
        server.stop()
