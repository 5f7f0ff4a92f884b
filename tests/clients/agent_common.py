"""What the agent scripts share: the command line, the release call that
proves a stream is streamed, fake tool output, a response body tee, and the
assistant message of a Chat Completions answer.

Imported by the scripts as ``agent_common`` (their folder is on sys.path when
they run); it runs under the clients' Python, like them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import httpx2

RunAgent = Callable[[str, str, int, set[int]], object]


def fit(lines: list[str], minimum: int, maximum: int) -> str:
    """Join lines until the text is at least ``minimum`` characters long."""
    out: list[str] = []
    size = -1  # no newline before the first line
    for line in lines:
        out.append(line)
        size += len(line) + 1
        if size >= minimum:
            break
    text = "\n".join(out)
    assert minimum <= len(text) <= maximum, len(text)
    return text


def release(stub_url: str, turn: int) -> int:
    """Tell the stub, directly (not through the proxy), that the first chunk
    or event of ``turn`` has arrived."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{stub_url}/release/{turn}", timeout=10) as response:
        response.read()
        return int(response.status)


class TeeStream(httpx2.SyncByteStream):
    """A response body that notes each piece of bytes, and when, as it is read."""

    def __init__(self, inner: httpx2.SyncByteStream, sink: list[tuple[float, bytes]]) -> None:
        self._inner = inner
        self._sink = sink

    @property
    def elapsed(self) -> timedelta | None:
        return getattr(self._inner, "elapsed", None)

    def __iter__(self) -> Iterator[bytes]:
        for piece in self._inner:
            self._sink.append((time.monotonic(), piece))
            yield piece

    def close(self) -> None:
        self._inner.close()


def main(description: str, base_url_example: str, run: RunAgent) -> None:
    """Parse the common command line, run the agent, print its JSON report."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--base-url", required=True, help=f"the proxy, e.g. {base_url_example}")
    parser.add_argument("--stub-url", required=True, help="the stub itself, for /release/<k>")
    parser.add_argument("--turns", type=int, default=12, help="most tool turns accepted")
    parser.add_argument(
        "--stream-turns",
        default="",
        help="comma-separated 0-based request numbers sent with stream=True",
    )
    args = parser.parse_args()
    stream_turns = {int(part) for part in args.stream_turns.split(",") if part.strip()}
    result = run(args.base_url, args.stub_url.rstrip("/"), args.turns, stream_turns)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


def chat_assistant_message(completion: Any) -> dict[str, Any]:
    """The assistant message of a Chat Completions answer, as an agent
    appends it to its history (content, and its tool calls if any)."""
    message = completion.choices[0].message
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
        ]
    return out
