"""Which traffic is MCP: MCP truncation cuts the answers of MCP requests
only, and every other JSON-RPC API passes byte for byte.

A flow is MCP when the proxy knows it from the request: a gateway flow, a
request header of the Streamable HTTP transport
(``obsmask_core.mcp.methods.MCP_REQUEST_HEADERS``), or a JSON-RPC body that
holds an MCP method (``answers_to_request``; in a batch that mixes MCP with
other methods, only the responses to the MCP requests' ids are cut). A GET
event stream with none of these (the legacy HTTP+SSE transport sends no
header) is decided by the first thing on it that tells
(``StreamDecision``). The mitmproxy side adds the user's include and exclude
filters.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container
from dataclasses import dataclass

from obsmask_core.mcp.jsonrpc_message import JsonRpcMessage, JsonRpcScan
from obsmask_core.mcp.methods import LEGACY_ENDPOINT_EVENT, MCP_REQUEST_HEADERS, is_mcp_method

TOOLS_CALL = "tools/call"


def canonical_id(id_text: str) -> str:
    """A JSON-RPC id as one text whatever its spelling (``"a"`` and
    ``"\\u0061"`` are the same id)."""
    try:
        return json.dumps(json.loads(id_text))
    except ValueError:
        return id_text


@dataclass(frozen=True)
class McpAnswers:
    """The responses of an answer that are MCP's: every one (``ids`` None),
    or only those to these ids (canonical_id)."""

    ids: frozenset[str] | None = None

    def covers(self, message: JsonRpcMessage) -> bool:
        return self.ids is None or (
            message.id_text is not None and canonical_id(message.id_text) in self.ids)


EVERY_RESPONSE = McpAnswers()


def mcp_request_ids(scan: JsonRpcScan) -> frozenset[str]:
    """The ids (canonical_id) of the MCP requests of a request body."""
    return frozenset(canonical_id(m.id_text) for m in scan.messages
                     if m.kind == "request" and m.id_text is not None
                     and is_mcp_method(m.method))


def tools_called(scan: JsonRpcScan) -> dict[str, str]:
    """The tool each tools/call request of a request body calls (its
    ``params.name``), by the request's id (canonical_id)."""
    return {canonical_id(m.id_text): m.params_name for m in scan.messages
            if m.kind == "request" and m.method == TOOLS_CALL and m.id_text is not None
            and m.params_name is not None}


def answers_to_request(scan: JsonRpcScan) -> McpAnswers | None:
    """Which responses to this request body are MCP's; None when no message
    in it has an MCP method (the body is not MCP). Every response when no
    request in it has another method; else, in a batch mixing MCP with
    other methods, only the responses to the MCP requests."""
    if scan.problem is not None or not any(is_mcp_method(m.method) for m in scan.messages):
        return None
    if all(is_mcp_method(m.method) for m in scan.messages if m.kind == "request"):
        return EVERY_RESPONSE
    return McpAnswers(mcp_request_ids(scan))


def has_mcp_header(headers: Container[str]) -> bool:
    """A request header of the Streamable HTTP transport (``headers`` looks
    names up without regard to case, as mitmproxy's do)."""
    return any(name in headers for name in MCP_REQUEST_HEADERS)


class StreamDecision:
    """Whether an event stream that no request fact tells about (a GET with
    no MCP header) is MCP, decided once, by the first of: an ``endpoint``
    event (the legacy transport's first event), or the first JSON-RPC
    message of the stream, which is MCP when it is a request or
    notification with an MCP method or a response to an id that an MCP
    request used (``known_id``, given canonical_id). Until then
    ``is_mcp`` is None and nothing is cut."""

    def __init__(self, known_id: Callable[[str], bool] | None = None) -> None:
        self.known_id = known_id
        self.is_mcp: bool | None = None

    def event_type(self, name: str) -> None:
        if self.is_mcp is None and name == LEGACY_ENDPOINT_EVENT:
            self.is_mcp = True

    def message(self, scan: JsonRpcScan) -> None:
        if self.is_mcp is not None or scan.problem is not None or not scan.messages:
            return
        first = scan.messages[0]
        if first.kind == "response":
            self.is_mcp = (first.id_text is not None and self.known_id is not None
                           and self.known_id(canonical_id(first.id_text)))
        else:
            self.is_mcp = is_mcp_method(first.method)
