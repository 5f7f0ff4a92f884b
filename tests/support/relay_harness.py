"""What the in-process tests of the gateway's relay share: a JSON-RPC call,
a relay to one local upstream, a server that lives for one test, and a port
nothing listens on."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

from obsmask_core.gateway.relay import GatewayRelay
from obsmask_core.gateway.upstreams import parse_upstream
from support.http_servers import Handler

REQUEST = b'{"jsonrpc": "2.0", "id": "r-1", "method": "tools/call"}'


def relay_to(port: int, timeout: float = 5.0) -> GatewayRelay:
    upstream = parse_upstream("up", f"http://127.0.0.1:{port}/mcp")
    return GatewayRelay(lambda: {"up": upstream}, lambda: timeout)


async def with_server(handler: Handler, test: Callable[[int], Awaitable[None]]) -> None:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        await test(server.sockets[0].getsockname()[1])
    finally:
        server.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
