"""Tool calls in a row on the official ``mcp`` SDK client, for the recall
end-to-end tests.

Runs under the clients' Python (``OBSMASK_CLIENTS_PYTHON``). It takes a plan,
a JSON list of steps ``{"url": ..., "name": ..., "arguments": {...}}``, and
makes each call with ``mcp.Client`` over streamable HTTP; consecutive steps
on the same URL share one connection (one initialize):

    mcp_calls.py --plan '[{"url": "http://127.0.0.1:N/obsmask/mcp",
                           "name": "recall", "arguments": {"id": "..."}}]'
                 [--mode legacy|auto] [--timeout 20]

A call that the server answers with a JSON-RPC error (the SDK raises
``MCPError``) is reported with its code, message and data, and the next
steps go on on the same connection. Any other exception ends the process
with a traceback on stderr and status 1.

Prints one JSON document on stdout: ``{"steps": [...]}``, one entry per
step: ``url``, ``name``, ``arguments``, the protocol version the session
agreed on (``protocol_version``), then ``ok: true`` with ``isError``
and ``content`` (each block's type and text), or ``ok: false`` with
``error``.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import AsyncExitStack
from itertools import groupby
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def _block(block: Any) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": block.text}
    return {"type": block.type, "raw": block.model_dump(mode="json", by_alias=True)}


async def _session(url: str, steps: list[dict[str, Any]], mode: str,
                   timeout: float) -> list[dict[str, Any]]:
    reports: list[dict[str, Any]] = []
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            # No proxy from the environment between us and 127.0.0.1.
            httpx2.AsyncClient(trust_env=False, timeout=httpx2.Timeout(timeout))
        )
        client = Client(streamable_http_client(url, http_client=http), mode=mode,
                        read_timeout_seconds=timeout, cache=None)
        with anyio.fail_after(timeout * (2 + len(steps))):
            async with client:
                protocol = getattr(client, "protocol_version", None)
                for step in steps:
                    report: dict[str, Any] = dict(step, protocol_version=protocol)
                    try:
                        result = await client.call_tool(step["name"], step["arguments"])
                    except MCPError as error:
                        report.update(ok=False, error={"code": error.code,
                                                       "message": error.message,
                                                       "data": error.data})
                    else:
                        report.update(ok=True, isError=bool(result.is_error),
                                      content=[_block(b) for b in result.content])
                    reports.append(report)
    return reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", required=True, help="a JSON list of {url, name, arguments}")
    parser.add_argument("--mode", default="legacy", choices=("legacy", "auto"))
    parser.add_argument("--timeout", type=float, default=20.0, help="bound of every request")
    args = parser.parse_args()
    plan: list[dict[str, Any]] = json.loads(args.plan)
    steps: list[dict[str, Any]] = []
    for url, group in groupby(plan, key=lambda step: step["url"]):
        steps += anyio.run(_session, url, list(group), args.mode, args.timeout)
    json.dump({"steps": steps}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
