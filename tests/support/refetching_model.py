"""A stub Chat Completions model that needs a file in view to work, and reads
it again whenever it is not: what a model does when masking took a result
it still needs.

The task: read ``NOTES.md``, then ``files`` source files one by one. Before
each step the model looks at the latest result of its ``NOTES.md`` read in
the request it got: when that result is not the file's text any more (a
placeholder took its place), it calls ``read_file`` on ``NOTES.md`` again
(the same arguments, written with its keys in another order and other
spacing each time, as models do). After the last file it answers with text.
Everything is decided from the request alone, so a retry gets the same
answer. The usage it reports is a provider's with OpenAI's prompt cache
(``caching_provider.OpenAIPromptCache``); ``bills`` keeps each request's.

The agent's ``read_file`` (tests/clients/chat_agent.py) returns a text that
begins with ``# <path>``: that is how the model tells the file from a
placeholder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from support.caching_provider import OpenAIBill, OpenAIPromptCache
from support.recording_server import Answer, Recorded, RecordingServer

Json = dict[str, object]
NOTES = "NOTES.md"
FINAL_TEXT = "All files read with the notes in view."
COMPLETION_TOKENS = 20
# The ways the model writes the same read of the notes.
NOTES_ARGUMENTS = ('{"path": "NOTES.md"}', '{ "path":"NOTES.md" }', '{"path":"NOTES.md"}')


class RefetchingModel:
    """The responder of a ``RecordingServer``."""

    def __init__(self, files: int) -> None:
        self.files = files
        self.cache = OpenAIPromptCache("messages")

    @property
    def bills(self) -> list[OpenAIBill]:
        return self.cache.bills

    def __call__(self, recorded: Recorded) -> Answer:
        if recorded.method != "POST" or not recorded.path.endswith("/chat/completions"):
            return Answer(status=404, body=b'{"error": {"message": "not found"}}')
        request = json.loads(recorded.body)
        messages = request["messages"]
        bill = self.cache.bill(request)
        message = self._next(messages)
        completion = {
            "id": f"chatcmpl-refetch-{len(self.bills)}", "object": "chat.completion",
            "created": 1_700_000_000, "model": request.get("model", "stub"),
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}],
            "usage": bill.chat_usage(COMPLETION_TOKENS),
        }
        return Answer(body=json.dumps(completion).encode())

    def _next(self, messages: list[Json]) -> Json:
        answers = sum(1 for m in messages if m.get("role") == "assistant")
        reads = _reads(messages)
        notes = [content for path, content in reads if path == NOTES]
        files_read = len({path for path, _ in reads if path != NOTES})
        if not notes or not notes[-1].startswith(f"# {NOTES}"):
            arguments = NOTES_ARGUMENTS[len(notes) % len(NOTES_ARGUMENTS)]
            return _call(answers, arguments, "I need the notes in view.")
        if files_read < self.files:
            return _call(answers, json.dumps({"path": f"src/module_{files_read}.py"}),
                         "Next file.")
        return {"role": "assistant", "content": FINAL_TEXT}


def _call(answers: int, arguments: str, thought: str) -> Json:
    return {"role": "assistant", "content": thought, "tool_calls": [{
        "id": f"call_refetch_{answers}", "type": "function",
        "function": {"name": "read_file", "arguments": arguments}}]}


def _reads(messages: list[Json]) -> list[tuple[str, str]]:
    """(path, result text) of every read_file call with its result, in order."""
    paths: dict[object, str] = {}
    reads: list[tuple[str, str]] = []
    for message in messages:
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function", {})
            if function.get("name") == "read_file":
                paths[call.get("id")] = json.loads(function.get("arguments") or "{}").get("path")
        if message.get("role") == "tool" and message.get("tool_call_id") in paths:
            content = message.get("content")
            reads.append((paths[message["tool_call_id"]],
                          content if isinstance(content, str) else ""))
    return reads


@contextmanager
def refetching_model(files: int) -> Iterator[tuple[RecordingServer, RefetchingModel]]:
    """A running stub model; stopped on exit, whatever happened."""
    model = RefetchingModel(files)
    server = RecordingServer(model)
    server.start()
    try:
        yield server, model
    finally:
        server.stop()
