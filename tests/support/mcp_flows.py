"""MCP flows and the three addons that handle them (settings, gateway, MCP
truncation), for the addon tests in mitmproxy's test context."""

from __future__ import annotations

import asyncio
import json

from mitmproxy import http
from mitmproxy.test import tflow, tutils

from obsmask_core.mitm.gateway_addon import McpGateway
from obsmask_core.mitm.mcp_addon import McpTruncation
from obsmask_core.mitm.recall_addon import Recall
from obsmask_core.mitm.settings_addon import SettingsFile

LONG = "HEAD" + "x" * 20_000 + "TAIL"


def response_message(text: str = LONG, message_id: int = 3) -> bytes:
    return json.dumps({
        "jsonrpc": "2.0", "id": message_id,
        "result": {"content": [{"type": "text", "text": text}], "isError": False},
    }).encode()


def mcp_flow(
    answer: bytes,
    content_type: str = "application/json",
    request_body: bytes = b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call"}',
    method: str = "POST",
    path: str = "/mcp",
) -> tflow.HTTPFlow:
    request = tutils.treq(method=method.encode(), path=path.encode(), content=request_body)
    response = tutils.tresp(content=b"")
    response.headers["content-type"] = content_type
    response.raw_content = answer
    response.headers["content-length"] = str(len(answer))
    return tflow.tflow(req=request, resp=response)


class McpAddons:
    """The MCP addon with the gateway and settings addons it runs beside, in
    the order obsmask.py lists them; ``limits`` and the rest are the MCP
    addon's, ``servers`` and ``timeout`` the gateway's. ``recall``: the
    recall addon the MCP addon hands cut strings to, if any."""

    def __init__(self, recall: Recall | KeptStrings | None = None) -> None:
        self.settings = SettingsFile()
        self.gateway = McpGateway(self.settings)
        self.mcp = McpTruncation(self.settings, recall=recall)

    def __getattr__(self, name: str) -> object:
        owner = self.gateway if name in ("servers", "timeout", "relay") else self.mcp
        return getattr(owner, name)

    async def requestheaders(self, flow: http.HTTPFlow) -> None:
        await self.gateway.requestheaders(flow)

    async def request(self, flow: http.HTTPFlow) -> None:
        await self.gateway.request(flow)
        self.mcp.request(flow)

    def response(self, flow: http.HTTPFlow) -> None:
        self.gateway.response(flow)
        self.mcp.response(flow)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        self.mcp.responseheaders(flow)


def run_hooks(addons: McpAddons, flow: tflow.HTTPFlow) -> None:
    asyncio.run(addons.request(flow))
    addons.response(flow)


class KeptStrings:
    """A stand-in for the recall addon (its interface: ``enabled``, ``keep``,
    ``answered``) that keeps what it is handed, in memory."""

    answered = staticmethod(Recall.answered)

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.kept: list[tuple[str, str]] = []

    def keep(self, recall_id: str, text: str) -> None:
        self.kept.append((recall_id, text))
