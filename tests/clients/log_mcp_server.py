"""An MCP server on the official ``mcp`` SDK whose one tool returns a long,
many-lined log, for the recall end-to-end tests.

Runs under the clients' Python (``OBSMASK_CLIENTS_PYTHON``), like the other
servers. Streamable HTTP on 127.0.0.1 at ``/mcp``:

    log_mcp_server.py [--port 0] [--json-response]

Like tests/clients/mcp_server.py, it binds its socket first and prints one
line ``{"port": N, "path": "/mcp"}`` on stdout once it accepts connections;
without ``--json-response`` the SDK answers with ``text/event-stream``.

One tool, unstructured (the text is only in ``content``):
``build_log(lines, tag)``: ``lines`` lines (newline-separated, no newline
after the last), each one different and naming its number and ``tag``, so
that any line range of it is recognisable and two tags give two texts.
"""

from __future__ import annotations

import argparse
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_serving import serve_app

PATH = "/mcp"


def build_log_text(lines: int, tag: str) -> str:
    """``lines`` numbered lines of a build log, about 60 characters each."""
    return "\n".join(
        f"[{tag}] step {n:05d}: compiled unit_{n % 97:02d}.o in {(n * 37) % 1000:03d} ms"
        for n in range(1, lines + 1)
    )


def build_server() -> MCPServer:
    server = MCPServer(name="obsmask-e2e-log", log_level="WARNING")

    @server.tool(description="Return a build log of `lines` lines.", structured_output=False)
    def build_log(lines: int, tag: str) -> str:
        return build_log_text(lines, tag)

    return server


async def serve(port: int, json_response: bool) -> None:
    app = build_server().streamable_http_app(
        streamable_http_path=PATH, json_response=json_response, host="127.0.0.1"
    )
    await serve_app(app, port, PATH)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: chosen by the system")
    parser.add_argument(
        "--json-response", action="store_true", help="answer application/json, not SSE"
    )
    args = parser.parse_args()
    try:
        anyio.run(serve, args.port, args.json_response)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
