"""A tool-calling agent on the real ``openai`` SDK (Chat Completions) that
also uses an MCP server, obsmask's recall server, on the real ``mcp`` SDK:
for the recall end-to-end test.

Runs under the clients' Python (``OBSMASK_CLIENTS_PYTHON``):

    recall_chat_agent.py --base-url http://127.0.0.1:PORT/v1
                         --recall-url http://127.0.0.1:PORT/obsmask/mcp [--turns 8]

It does what an agent with an MCP server does: it connects to the MCP
server at ``--recall-url`` once (the SDK's default connection mode), lists
its tools and offers each to the model as a function next to its own local
tool ``read_file``; then it sends the whole conversation, runs the tools
the model asked for (``read_file`` itself, an MCP tool with
``call_tool``, the text blocks of its answer joined as the tool result),
appends their results and sends again, until the model answers with text
or ``--turns`` tool turns have passed.

Prints one JSON document on stdout: the tools offered, every request (the
messages and the exact body bytes the SDK wrote), every MCP call (call id,
arguments, text answered, ``isError``) and the final messages.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import sys
from typing import Any

import httpx2
import openai
from agent_common import chat_assistant_message
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

MODEL = "stub-model"
TIMEOUT = 20.0
READ_FILE: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the repository.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}


def read_file_output(path: str) -> str:
    """A fake source file: 60 lines, each different and naming the file,
    about 3,000 characters."""
    return "\n".join(
        f"{path}:{n:03d}: setting_{n} = compute({n * 7}, scale={len(path) + n})"
        for n in range(1, 61)
    )


async def run(base_url: str, recall_url: str, max_turns: int) -> dict[str, Any]:
    sent_bodies: list[bytes] = []

    async def remember_body(request: httpx2.Request) -> None:
        sent_bodies.append(await request.aread())

    http_client = openai.DefaultAsyncHttpxClient(
        event_hooks={"request": [remember_body]}, trust_env=False
    )
    llm = openai.AsyncOpenAI(
        base_url=base_url, api_key="test-key", max_retries=0, timeout=TIMEOUT,
        http_client=http_client,
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": "Check the settings modules and summarise them."},
    ]
    requests: list[dict[str, Any]] = []
    mcp_calls: list[dict[str, Any]] = []
    async with httpx2.AsyncClient(trust_env=False, timeout=httpx2.Timeout(TIMEOUT)) as mcp_http:
        mcp = Client(streamable_http_client(recall_url, http_client=mcp_http),
                     read_timeout_seconds=TIMEOUT, cache=None)
        async with mcp:
            listed = await mcp.list_tools()
            mcp_tools = {tool.name for tool in listed.tools}
            tools = [READ_FILE] + [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description or "",
                        "parameters": tool.model_dump(mode="json", by_alias=True)["inputSchema"],
                    },
                }
                for tool in listed.tools
            ]
            for turn in range(max_turns + 1):
                requests.append({"turn": turn, "messages": copy.deepcopy(messages)})
                before = len(sent_bodies)
                completion = await llm.chat.completions.create(
                    model=MODEL,
                    messages=messages,  # type: ignore[arg-type]
                    tools=tools,  # type: ignore[arg-type]
                )
                if len(sent_bodies) != before + 1:
                    raise SystemExit(f"turn {turn}: {len(sent_bodies) - before} HTTP requests")
                requests[-1]["sent_body"] = sent_bodies[-1].decode("utf-8")
                assistant = chat_assistant_message(completion)
                messages.append(assistant)
                calls = assistant.get("tool_calls") or []
                if not calls:
                    break
                for call in calls:
                    name = call["function"]["name"]
                    arguments = json.loads(call["function"]["arguments"] or "{}")
                    if name in mcp_tools:
                        result = await mcp.call_tool(name, arguments)
                        text = "".join(b.text for b in result.content if b.type == "text")
                        mcp_calls.append({"call_id": call["id"], "name": name,
                                          "arguments": arguments, "text": text,
                                          "isError": bool(result.is_error)})
                    elif name == "read_file":
                        text = read_file_output(arguments["path"])
                    else:
                        text = f"unknown tool {name!r}"
                    messages.append({"role": "tool", "tool_call_id": call["id"],
                                     "content": text})
            else:
                raise SystemExit(f"the model still called tools after {max_turns} tool turns")
    return {
        "tools": tools,
        "requests": requests,
        "mcp_calls": mcp_calls,
        "final_messages": messages,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="the proxy, e.g. http://127.0.0.1:N/v1")
    parser.add_argument("--recall-url", required=True, help="the MCP server's URL")
    parser.add_argument("--turns", type=int, default=8, help="most tool turns accepted")
    args = parser.parse_args()
    report = asyncio.run(run(args.base_url, args.recall_url, args.turns))
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
