"""Serve an MCP SDK server app on 127.0.0.1 and say where, for the test
servers of this folder (mcp_server.py, log_mcp_server.py).

Imported by them as ``mcp_serving`` (their folder is on sys.path when they
run); it runs under the clients' Python, like them.
"""

from __future__ import annotations

import json
import socket

import anyio
import uvicorn
from starlette.applications import Starlette


async def serve_app(app: Starlette, port: int, path: str) -> None:
    """Serve ``app`` on ``port`` (0: chosen by the system) until stopped.
    The socket is bound first; once the server accepts connections, one
    line ``{"port": N, "path": PATH}`` goes to stdout (the tests wait for it)."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    chosen = sock.getsockname()[1]

    async def announce() -> None:
        while not server.started:
            await anyio.sleep(0.02)
        print(json.dumps({"port": chosen, "path": path}), flush=True)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(announce)
        await server.serve(sockets=[sock])
        tasks.cancel_scope.cancel()
