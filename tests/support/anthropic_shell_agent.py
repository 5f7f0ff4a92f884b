"""A tool-using agent on the real ``anthropic`` SDK (Messages API) whose one
tool, ``Bash``, prints as many characters as the model asks for: the model
(a scripted server, tests/support/scripted_anthropic.py) decides the size of
every tool result, the test decides the first message.

Runs under the clients' Python (``OBSMASK_CLIENTS_PYTHON``), not the tests'
one; the tests start it with ``run_shell_agent`` (below the script's part,
imported only by the tests).

    anthropic_shell_agent.py --base-url http://127.0.0.1:PORT [--base-url ...] --prompt TEXT
        [--max-turns 30] [--stream-turns 1,4] [--breakpoint last|none]
        [--first-breakpoint-turns 0,2]

The shell knows one command, ``emit N [label]``: exactly N characters of
build-log lines (``wait S emit N [label]``: the same after S seconds).
Request k (0-based) is the one that follows k tool turns; the ones in
``--stream-turns`` are streamed (``messages.stream``).
``--breakpoint last`` puts a ``cache_control`` block on the last content
block of the last message of every request, as Claude Code does, so the
breakpoint moves from request to request; the requests in
``--first-breakpoint-turns`` also carry one on the first message's block.
The conversation the agent keeps has none: only what it sends has them.

Prints one JSON document on stdout: every request as sent (the exact body
bytes the SDK wrote) and the final conversation.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

MODEL = "claude-stub-1"
MAX_TOKENS = 1024
SYSTEM = "You are a build agent. Run the commands you are given with Bash."
TOOLS: list[dict[str, object]] = [
    {
        "name": "Bash",
        "description": "Run a shell command.",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "description": {"type": "string"},
            },
            "required": ["command"],
        },
    }
]
BREAKPOINT = {"type": "ephemeral"}
AGENT_TIMEOUT = 120.0

Json = dict[str, object]


def emit(size: int, label: str) -> str:
    """Exactly ``size`` characters of build-log lines, different per label."""
    lines: list[str] = []
    total = number = 0
    while total < size:
        line = (f"[{label}] {number:05d} compiled src/module_{number % 97}.c "
                f"-> build/module_{number % 97}.o in {(number * 7) % 113} ms\n")
        lines.append(line)
        total += len(line)
        number += 1
    return "".join(lines)[:size]


def shell(command: str) -> str:
    parts = command.split()
    if len(parts) > 2 and parts[0] == "wait" and parts[1].isdigit():
        # ``wait S <command>``: the command, after S seconds (a user away
        # from the agent, a long build): a pause between two requests.
        time.sleep(int(parts[1]))
        parts = parts[2:]
    if len(parts) in (2, 3) and parts[0] == "emit" and parts[1].isdigit():
        return emit(int(parts[1]), parts[2] if len(parts) == 3 else "out")
    return f"sh: {command}: command not found"


def with_breakpoints(messages: list[Json], last: bool, first: bool) -> list[Json]:
    """The messages as sent: a copy, with the cache breakpoints asked for."""
    out = copy.deepcopy(messages)
    marked = []
    if last:
        marked.append(out[-1])
    if first:
        marked.append(out[0])
    for message in marked:
        content = message["content"]
        assert isinstance(content, list) and content
        block = content[-1] if message is out[-1] else content[0]
        assert isinstance(block, dict)
        block["cache_control"] = dict(BREAKPOINT)
    return out


def run(base_urls: list[str], prompt: str, max_turns: int, stream_turns: set[int],
        breakpoint_last: bool, first_breakpoint_turns: set[int]) -> Json:
    import anthropic
    import httpx2

    sent_bodies: list[bytes] = []

    def remember_body(request: httpx2.Request) -> None:
        sent_bodies.append(request.read())

    http_client = anthropic.DefaultHttpxClient(
        event_hooks={"request": [remember_body]}, trust_env=False
    )
    # Several base URLs: the requests take turns (a load balancer).
    clients = [anthropic.Anthropic(base_url=base_url, api_key="test", max_retries=0,
                                   timeout=30, http_client=http_client)
               for base_url in base_urls]
    messages: list[Json] = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    requests: list[Json] = []
    for turn in range(max_turns + 1):
        client = clients[turn % len(clients)]
        stream = turn in stream_turns
        sent = with_breakpoints(messages, breakpoint_last, turn in first_breakpoint_turns)
        arguments = {
            "model": MODEL,
            "max_tokens": MAX_TOKENS,
            "system": SYSTEM,
            "tools": TOOLS,
            "messages": sent,
        }
        before = len(sent_bodies)
        if stream:
            with client.messages.stream(**arguments) as events:  # type: ignore[arg-type]
                message = events.get_final_message()
        else:
            message = client.messages.create(**arguments)  # type: ignore[call-overload]
        if len(sent_bodies) != before + 1:
            raise SystemExit(f"turn {turn}: {len(sent_bodies) - before} HTTP requests, not 1")
        requests.append({"turn": turn, "stream": stream,
                         "sent_body": sent_bodies[-1].decode("utf-8")})
        content = [block.to_dict(mode="json") for block in message.content]
        messages.append({"role": "assistant", "content": content})
        uses = [block for block in content if block.get("type") == "tool_use"]
        if not uses:
            break
        results: list[Json] = []
        for use in uses:
            arguments_in = use["input"]
            assert isinstance(arguments_in, dict)
            results.append({"type": "tool_result", "tool_use_id": use["id"],
                            "content": shell(str(arguments_in.get("command")))})
        messages.append({"role": "user", "content": results})
    else:
        raise SystemExit(f"the model still called tools after {max_turns} tool turns")
    return {"requests": requests, "final_messages": messages}


def _numbers(text: str) -> set[int]:
    return {int(part) for part in text.split(",") if part.strip()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, action="append")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--max-turns", type=int, default=30)
    parser.add_argument("--stream-turns", default="")
    parser.add_argument("--breakpoint", choices=["last", "none"], default="none")
    parser.add_argument("--first-breakpoint-turns", default="")
    args = parser.parse_args()
    report = run(args.base_url, args.prompt, args.max_turns, _numbers(args.stream_turns),
                 args.breakpoint == "last", _numbers(args.first_breakpoint_turns))
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


# For the tests (the tests' Python) -------------------------------------------------


def run_shell_agent(
    clients_python: str, base_url: str | Sequence[str], prompt: str, *,
    stream_turns: tuple[int, ...] = (),
    breakpoint: str = "none", first_breakpoint_turns: tuple[int, ...] = (),
    max_turns: int = 30, log: Callable[[], str] = str,
) -> Json:
    """Run this script to its end in the clients' Python (bounded by
    ``AGENT_TIMEOUT``); its JSON report, or an AssertionError with its
    output and what ``log`` says then (mitmdump's output, say)."""
    # No proxy from the environment between the agent and 127.0.0.1.
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    urls = [base_url] if isinstance(base_url, str) else list(base_url)
    command = [
        clients_python, str(Path(__file__).resolve()),
        *(part for url in urls for part in ("--base-url", url)), "--prompt", prompt,
        "--max-turns", str(max_turns),
        "--stream-turns", ",".join(map(str, stream_turns)), "--breakpoint", breakpoint,
        "--first-breakpoint-turns", ",".join(map(str, first_breakpoint_turns)),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, encoding="utf-8",
                          timeout=AGENT_TIMEOUT, check=False)
    if done.returncode != 0:
        raise AssertionError(f"the agent failed ({done.returncode}):\n{done.stderr}\n{log()}")
    report = json.loads(done.stdout)
    assert isinstance(report, dict)
    return report


if __name__ == "__main__":
    main()
