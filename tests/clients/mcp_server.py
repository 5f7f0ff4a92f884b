"""An MCP server on the official ``mcp`` SDK (``MCPServer``), for the end-to-end tests.

Runs under the clients' Python (``OBSMASK_CLIENTS_PYTHON``), like the agents.
It serves the streamable HTTP transport on 127.0.0.1 at ``/mcp``, or the
legacy HTTP+SSE transport (protocol 2024-11-05) at ``/sse``:

    mcp_server.py [--port 0] [--json-response] [--transport streamable-http|sse]

``--port 0`` (the default) lets the system choose; the server binds its socket
before anything else and prints one line ``{"port": N, "path": "/mcp"}`` on
stdout once it accepts connections. Without ``--json-response`` the SDK answers
each request with ``text/event-stream``; with it, with ``application/json``.

``--transport sse`` is the SDK's legacy transport (``MCPServer.sse_app``): the
client opens a GET stream on ``/sse`` that never ends, whose first event
(``event: endpoint``) names the URL to POST to (``/messages/?session_id=...``);
every POST is answered ``202 Accepted`` and every result comes as an
``event: message`` on the GET stream. ``--json-response`` does not apply.

Four tools, all unstructured (``structured_output=False``: the long string is
only in ``content``), with short descriptions so that ``tools/list`` stays
small:

- ``big_text(chars)``: ``chars`` characters, starting with ``HEAD-`` and
  ending with ``-TAIL``, every position recognisable (see ``big_text``);
- ``image()``: one PNG image block whose base64 is longer than 8000
  characters, the same bytes on every call;
- ``small()``: a short text;
- ``confirm()``: asks the client for an answer in the middle of the call
  (``ctx.elicit``, an ``elicitation/create`` request, form mode, schema
  ``{"answer": string}``) and, once it has one, returns one text:
  ``confirmed: <answer>`` (or ``not confirmed: <action>``), a newline and
  ``big_text_of(CONFIRM_CHARS)``, long enough to be cut. On streamable HTTP
  the request travels on the event stream of the pending ``tools/call``
  POST, which must reach the client before the call can end.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import struct
import sys
import zlib

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ImageContent
from mcp_serving import serve_app
from pydantic import BaseModel, Field

PATH = "/mcp"
SSE_PATH = "/sse"
TRANSPORTS = ("streamable-http", "sse")
SMALL_TEXT = "small result: ok"
IMAGE_SIDE = 64
CONFIRM_MESSAGE = "obsmask e2e: confirm the long answer?"
CONFIRM_CHARS = 10_000


class Confirmation(BaseModel):
    """The form confirm() asks the client to fill in."""

    answer: str = Field(description="The answer to return.")


def big_text_of(chars: int) -> str:
    """``chars`` characters: ``HEAD-``, numbered cells ``<000123>``, ``-TAIL``.

    A cell's number is its offset in the text, so any cut shows where it was.
    """
    if chars < 10:
        raise ValueError("big_text needs at least 10 characters")
    head, tail = "HEAD-", "-TAIL"
    cells: list[str] = []
    size = len(head)
    while size < chars - len(tail):
        cell = f"<{size:06d}>"
        cells.append(cell)
        size += len(cell)
    middle = "".join(cells)[: chars - len(head) - len(tail)]
    return head + middle + tail


def png_bytes(side: int = IMAGE_SIDE) -> bytes:
    """A valid RGB PNG of ``side`` x ``side`` pixels whose pixels come from
    SHA-256 (deterministic, and incompressible enough that the base64 stays
    long: 64 x 64 gives about 16 400 base64 characters)."""
    raw = bytearray()
    counter = 0
    for _row in range(side):
        raw.append(0)  # filter: none
        line = bytearray()
        while len(line) < side * 3:
            line += hashlib.sha256(f"obsmask-e2e-{counter}".encode()).digest()
            counter += 1
        raw += line[: side * 3]

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(raw), 9))
        + chunk(b"IEND", b"")
    )


def build_server() -> MCPServer:
    server = MCPServer(name="obsmask-e2e", log_level="WARNING")

    @server.tool(description="Return a text of `chars` characters.", structured_output=False)
    def big_text(chars: int) -> str:
        return big_text_of(chars)

    @server.tool(description="Return a PNG image.", structured_output=False)
    def image() -> ImageContent:
        data = base64.b64encode(png_bytes()).decode("ascii")
        return ImageContent(type="image", data=data, mime_type="image/png")

    @server.tool(description="Return a short text.", structured_output=False)
    def small() -> str:
        return SMALL_TEXT

    @server.tool(description="Ask for an answer, return it and a long text.",
                 structured_output=False)
    async def confirm(ctx: Context) -> str:
        result = await ctx.elicit(message=CONFIRM_MESSAGE, schema=Confirmation)
        if result.action == "accept":
            head = f"confirmed: {result.data.answer}"
        else:
            head = f"not confirmed: {result.action}"
        return head + "\n" + big_text_of(CONFIRM_CHARS)

    return server


async def serve(port: int, json_response: bool, transport: str) -> None:
    if transport == "sse":
        path = SSE_PATH
        app = build_server().sse_app(sse_path=SSE_PATH, host="127.0.0.1")
    else:
        path = PATH
        app = build_server().streamable_http_app(
            streamable_http_path=PATH, json_response=json_response, host="127.0.0.1"
        )
    await serve_app(app, port, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: chosen by the system")
    parser.add_argument(
        "--json-response", action="store_true", help="answer application/json, not SSE"
    )
    parser.add_argument(
        "--transport",
        default="streamable-http",
        choices=TRANSPORTS,
        help="sse: the legacy HTTP+SSE transport (GET /sse, POST /messages/)",
    )
    args = parser.parse_args()
    if args.json_response and args.transport == "sse":
        parser.error("--json-response applies to the streamable HTTP transport only")
    try:
        anyio.run(serve, args.port, args.json_response, args.transport)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
