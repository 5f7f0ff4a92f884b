"""An MCP client on the official ``mcp`` SDK (``mcp.Client``), for the end-to-end tests.

Runs under the clients' Python (``OBSMASK_CLIENTS_PYTHON``), like the agents.
It connects over streamable HTTP to ``--url`` (the server itself, mitmdump in
reverse mode in front of it, or obsmask's gateway route), initializes, lists
the tools and calls ``big_text(100000)``, ``image()`` and ``small()`` of
tests/clients/mcp_server.py:

    mcp_client.py --url http://127.0.0.1:PORT/mcp [--url ...] [--elicit-url ...]
                  [--mode legacy|auto] [--transport auto|streamable-http|sse]
                  [--timeout 30] [--expect-error]

``--elicit-url URL`` (repeatable; run after every ``--url``) is an
elicitation run instead: the client installs an elicitation callback that
answers every ``elicitation/create`` request with ``accept`` and the content
``{"answer": ELICIT_ANSWER}``, initializes and calls ``confirm()`` only, whose
tool asks that question in the middle of the call. The report then has the
``confirm`` call (with its ``seconds``) and ``elicitations``: every request
the callback got (its JSON-RPC id, mode, message, requested schema, and
``after``: seconds since the call began); the client's answer to it is the
POST listed with that ``rpc_id`` and no ``rpc_method``. Give it ``--mode
legacy`` (the default) so that, on a server answering with SSE, the request
comes on the call's event stream.

``--transport auto`` (the default) takes a URL whose path ends in ``/sse``
for the legacy HTTP+SSE transport (protocol 2024-11-05, the SDK's
``mcp.client.sse.sse_client``: a GET stream that never ends carries every
result, the POSTs are answered ``202 Accepted``), any other for streamable
HTTP; ``streamable-http`` and ``sse`` force one for every URL.

``--mode legacy`` (the default) is the initialize handshake of the
2025-era protocol, on which the SDK's stateful server answers every request
with ``text/event-stream`` (unless it runs with ``--json-response``).
``--mode auto`` is the SDK's own default: it probes ``server/discover`` first
and falls back to ``initialize``.

Prints one JSON document on stdout: the transport, the negotiated protocol
version, the ``tools/list`` result as JSON, every call's content (text, or
data length, SHA-256 and MIME type), ``isError``, and every HTTP exchange the
SDK made (method, path, JSON-RPC method, id and tool name, status,
Content-Type; on the legacy transport, a POST whose ``202`` has not arrived
when the client leaves, its result already in hand, is not listed). Any
exception, a pydantic ``ValidationError`` in the SDK included, ends the
process with a traceback on stderr and a non-zero status.

With ``--expect-error`` the connection is expected to fail with a JSON-RPC
error (the SDK's ``MCPError``): its code, message and data are printed
instead, and the process fails if the connection succeeds or fails any
other way. Every request is bounded by ``--timeout`` seconds, a run by five
times that.

Several ``--url`` (one Python start-up instead of several: importing the SDK
takes more than a second of CPU) are run one after the other, each in its
own event loop and HTTP client; the document is then ``{"runs": [...]}``,
one entry per URL (the ``--url`` ones, then the ``--elicit-url`` ones) with
``url``, ``elicit``, ``ok`` and the report, or ``traceback`` when it failed
(the process then fails too, after printing it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import traceback
from contextlib import AsyncExitStack
from functools import partial
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitRequestParams, ElicitResult

BIG_CHARS = 100_000
EXIT_UNEXPECTED = 3
CALLS = (("big_text", {"chars": BIG_CHARS}), ("image", {}), ("small", {}))
ELICIT_CALLS = (("confirm", {}),)
ELICIT_ANSWER = "yes, obsmask-elicited-answer-42"
TRANSPORTS = ("auto", "streamable-http", "sse")


def _content(block: Any) -> dict[str, Any]:
    """One content block as the SDK handed it over."""
    out: dict[str, Any] = {"type": block.type}
    if block.type == "text":
        out["text"] = block.text
    elif block.type in ("image", "audio"):
        data = block.data
        out["data_length"] = len(data)
        out["data_sha256"] = hashlib.sha256(data.encode("ascii")).hexdigest()
        out["mimeType"] = block.mime_type
    else:
        out["raw"] = block.model_dump(mode="json", by_alias=True)
    return out


def _call_report(result: Any) -> dict[str, Any]:
    return {
        "isError": bool(result.is_error),
        "content": [_content(block) for block in result.content],
        "structuredContent": result.structured_content,
    }


class Exchanges:
    """Every HTTP request the SDK makes and the head of its answer."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def on_response(self, response: httpx2.Response) -> None:
        request = response.request
        rpc_method = rpc_id = tool = None
        if request.method == "POST":
            try:
                message = json.loads(request.content)
                rpc_method, rpc_id = message.get("method"), message.get("id")
                if rpc_method == "tools/call":
                    tool = message["params"]["name"]
            except (ValueError, AttributeError, KeyError, TypeError):
                rpc_method = "?"
        self.seen.append(
            {
                "method": request.method,
                "path": request.url.path,
                "rpc_method": rpc_method,
                "rpc_id": rpc_id,
                "tool": tool,
                "status": response.status_code,
                "content_type": response.headers.get("content-type", ""),
            }
        )


def _http_client(
    exchanges: Exchanges,
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """The HTTP client of either transport (the legacy one makes its own with this)."""
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout,
        auth=auth,
        trust_env=False,  # no proxy from the environment between us and 127.0.0.1
        event_hooks={"response": [exchanges.on_response]},
    )


class Elicitations:
    """The elicitation callback: accepts with ``ELICIT_ANSWER``, records each request."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.call_started = time.monotonic()

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult:
        self.seen.append(
            {
                "request_id": context.request_id,
                "mode": params.mode,
                "message": params.message,
                "requested_schema": getattr(params, "requested_schema", None),
                "after": time.monotonic() - self.call_started,
            }
        )
        return ElicitResult(action="accept", content={"answer": ELICIT_ANSWER})


def _is_legacy_sse(url: str, transport: str) -> bool:
    if transport == "auto":
        return httpx2.URL(url).path.rstrip("/").endswith("/sse")
    return transport == "sse"


async def _run(
    url: str,
    mode: str,
    transport_name: str,
    timeout: float,
    exchanges: Exchanges,
    elicit: bool = False,
) -> dict[str, Any]:
    report: dict[str, Any] = {}
    elicitations = Elicitations() if elicit else None
    async with AsyncExitStack() as stack:
        if _is_legacy_sse(url, transport_name):
            report["transport"] = "sse"
            # sse_client builds its HTTP client itself, from the factory; its
            # GET stream is bounded by sse_read_timeout between two events.
            transport: Any = sse_client(
                url,
                timeout=timeout,
                sse_read_timeout=timeout,
                httpx_client_factory=partial(_http_client, exchanges),
            )
        else:
            report["transport"] = "streamable-http"
            http = await stack.enter_async_context(
                _http_client(exchanges, timeout=httpx2.Timeout(timeout))
            )
            transport = streamable_http_client(url, http_client=http)
        client = Client(
            transport,
            mode=mode,
            read_timeout_seconds=timeout,
            cache=None,
            elicitation_callback=elicitations,
        )
        # Each request is bounded by read_timeout_seconds; the whole run by 5 of them.
        with anyio.fail_after(timeout * 5):
            async with client:
                report["protocol_version"] = client.protocol_version
                if elicitations is None:
                    tools = await client.list_tools()
                    report["tools"] = tools.model_dump(mode="json", by_alias=True)
                calls: dict[str, Any] = {}
                for name, arguments in ELICIT_CALLS if elicitations else CALLS:
                    started = time.monotonic()
                    if elicitations is not None:
                        elicitations.call_started = started
                    result = await client.call_tool(name, arguments)
                    calls[name] = {**_call_report(result), "seconds": time.monotonic() - started}
                report["calls"] = calls
    if elicitations is not None:
        report["elicitations"] = elicitations.seen
    return report


def _find_mcp_error(error: BaseException) -> MCPError | None:
    """The MCPError in ``error``, which anyio may have put in an exception group."""
    if isinstance(error, MCPError):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _find_mcp_error(inner)
            if found is not None:
                return found
    return None


def _one(
    url: str, mode: str, transport: str, timeout: float, expect_error: bool, elicit: bool
) -> tuple[bool, dict[str, Any]]:
    """Run against ``url``: (as expected?, the report, or the error and its traceback)."""
    exchanges = Exchanges()
    started = time.monotonic()
    try:
        report = anyio.run(_run, url, mode, transport, timeout, exchanges, elicit)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - reported, then the process fails
        found = _find_mcp_error(error)
        if expect_error and found is not None:
            return True, {
                "error": {"code": found.code, "message": found.message, "data": found.data},
                "wrapped": not isinstance(error, MCPError),
                "seconds": time.monotonic() - started,
                "exchanges": exchanges.seen,
            }
        return False, {
            "traceback": traceback.format_exc(),
            "exchanges": exchanges.seen,
        }
    report["exchanges"] = exchanges.seen
    report["seconds"] = time.monotonic() - started
    if expect_error:
        return False, {"traceback": "expected a JSON-RPC error, got a report", **report}
    return True, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", action="append", default=[], help="e.g. http://127.0.0.1:PORT/mcp"
    )
    parser.add_argument(
        "--elicit-url",
        action="append",
        default=[],
        help="an elicitation run: answer the server's elicitation, call confirm() only",
    )
    parser.add_argument("--mode", default="legacy", choices=("legacy", "auto"))
    parser.add_argument(
        "--transport",
        default="auto",
        choices=TRANSPORTS,
        help="auto: the legacy HTTP+SSE transport for a URL ending in /sse, else streamable HTTP",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="bound of every request")
    parser.add_argument(
        "--expect-error", action="store_true", help="expect a JSON-RPC error, print it"
    )
    args = parser.parse_args()
    if not args.url and not args.elicit_url:
        parser.error("give at least one --url or --elicit-url")
    runs = []
    failed = False
    targets = [(url, False) for url in args.url] + [(url, True) for url in args.elicit_url]
    for url, elicit in targets:
        ok, payload = _one(
            url, args.mode, args.transport, args.timeout, args.expect_error, elicit
        )
        if not ok:
            failed = True
            print(f"{url}: {payload['traceback']}", file=sys.stderr)
            print(f"HTTP exchanges: {json.dumps(payload['exchanges'])}", file=sys.stderr)
        runs.append({"url": url, "elicit": elicit, "ok": ok, **payload})
    if len(runs) == 1:
        if not failed:
            json.dump(runs[0], sys.stdout)
    else:
        json.dump({"runs": runs}, sys.stdout)
    if failed:
        sys.exit(EXIT_UNEXPECTED if args.expect_error else 1)


if __name__ == "__main__":
    main()
