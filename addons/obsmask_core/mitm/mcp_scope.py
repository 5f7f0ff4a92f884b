"""Which flows are MCP, for the MCP addon: the request's facts (a gateway
flow, an MCP header, an MCP method, remembered by ``note_request``), the
user's ``mcpmask_include`` / ``mcpmask_exclude`` filters, and the ids of
recent MCP requests by which a GET stream that begins with a response is
told MCP. The decisions themselves are ``obsmask_core.mcp.scope``'s."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from mitmproxy import flowfilter, http

from obsmask_core.mcp.jsonrpc_scan import scan_jsonrpc
from obsmask_core.mcp.limits import MASKING_SECTION, TruncationLimits
from obsmask_core.mcp.scope import (
    EVERY_RESPONSE,
    McpAnswers,
    StreamDecision,
    answers_to_request,
    has_mcp_header,
    mcp_request_ids,
    tools_called,
)
from obsmask_core.mitm.flows import MCP_METADATA
from obsmask_core.mitm.options import refuse
from obsmask_core.shared.request_record import McpKey

PREFIX = "mcpmask_"
# The ids of recent MCP requests, per server, by which a GET stream that
# begins with a response is told MCP (the legacy transport answers a POST on
# its GET stream), with the tool each called, by which a response on such a
# stream gets its tool's limit. Bounded: the oldest are forgotten.
REMEMBERED_IDS = 4096


def _compiled(name: str, expression: str) -> flowfilter.TFilter | None:
    """A filter option compiled; OptionsError naming it when it is wrong."""
    if not expression.strip():
        return None
    try:
        return flowfilter.parse(expression)
    except ValueError as e:
        refuse(f"obsmask: {PREFIX}{name} ([{'.'.join(MASKING_SECTION)}] {name}): {e}")


class McpScope:
    """Which flows are MCP: the request's facts and the user's filters."""

    def __init__(self) -> None:
        self.include: flowfilter.TFilter | None = None
        self.exclude: flowfilter.TFilter | None = None
        # (server, canonical id) -> the tool the request called, if any
        self._ids: OrderedDict[tuple[str, int, str], str | None] = OrderedDict()

    def configure(self, limits: TruncationLimits) -> None:
        self.include = _compiled("include", limits.include)
        self.exclude = _compiled("exclude", limits.exclude)

    def excluded(self, flow: http.HTTPFlow) -> bool:
        return self.exclude is not None and bool(self.exclude(flow))

    def of(self, flow: http.HTTPFlow) -> tuple[str, McpAnswers] | None:
        """Why the flow is MCP, and which responses of its answer are; None
        when nothing says it is (a GET event stream may still turn out to
        be: ``may_be_stream``)."""
        if self.excluded(flow):
            return None
        facts = flow.metadata.get(MCP_METADATA)
        if isinstance(facts, dict):
            if McpKey.GATEWAY_SERVER in facts:
                return "gateway", EVERY_RESPONSE
            if facts.get("mcp") == "method":
                ids = facts.get("mcp_ids")
                return "method", (EVERY_RESPONSE if ids is None else McpAnswers(frozenset(ids)))
        if has_mcp_header(flow.request.headers):
            return "header", EVERY_RESPONSE
        if self.include is not None and self.include(flow):
            return "include", EVERY_RESPONSE
        return None

    def may_be_stream(self, flow: http.HTTPFlow) -> bool:
        """A GET event stream that the stream itself may tell MCP (the legacy
        transport sends no MCP header)."""
        return flow.request.method == "GET" and not self.excluded(flow)

    def note_request(self, flow: http.HTTPFlow, body: bytes) -> None:
        """Remember that a POST's JSON-RPC body holds MCP methods (and, in a
        batch that mixes them with others, the ids of the MCP requests), and
        the tool of each of its ids for a GET stream of the same server. A
        gateway flow is MCP already: only its ids are noted."""
        try:
            scan = scan_jsonrpc(body.decode("utf-8"))
        except UnicodeDecodeError:
            return
        facts = flow.metadata.get(MCP_METADATA)
        if not (isinstance(facts, dict) and McpKey.GATEWAY_SERVER in facts):
            answers = answers_to_request(scan)
            if answers is None:
                return
            facts = {"request": sorted(scan.kinds()), "mcp": "method"}
            if answers.ids is not None:
                facts["mcp_ids"] = sorted(answers.ids)
            flow.metadata[MCP_METADATA] = facts
        elif scan.problem is not None:
            return
        tools = tools_called(scan)
        server = _server_key(flow)
        for request_id in mcp_request_ids(scan):
            self._ids[(*server, request_id)] = tools.get(request_id)
            self._ids.move_to_end((*server, request_id))
        while len(self._ids) > REMEMBERED_IDS:
            self._ids.popitem(last=False)

    def stream_decision(self, flow: http.HTTPFlow) -> StreamDecision:
        server = _server_key(flow)

        def known(request_id: str) -> bool:
            return (*server, request_id) in self._ids

        return StreamDecision(known)

    def tool_of(self, flow: http.HTTPFlow) -> Callable[[str], str | None]:
        """The tool a response of this flow's answer reports on, by the
        response's id (canonical_id): the flow's own tools/call requests
        for a POST; for a GET stream (the legacy transport answers there
        the POSTs of other flows), the tools of the recent requests to the
        same server, remembered with their ids."""
        if flow.request.method == "GET":
            server = _server_key(flow)
            return lambda request_id: self._ids.get((*server, request_id))
        # Read from the request again when first asked (a tools/call request
        # is small), rather than kept in the flow's metadata: a tool's name
        # is the client's text, and obsmask leaves none on a flow.
        found: list[dict[str, str]] = []

        def tool(request_id: str) -> str | None:
            if not found:
                body = flow.request.get_content(strict=False) or b""
                try:
                    found.append(tools_called(scan_jsonrpc(body.decode("utf-8"))))
                except UnicodeDecodeError:
                    found.append({})
            return found[0].get(request_id)

        return tool


def server_name(flow: http.HTTPFlow) -> str:
    """The server a flow talks to, as max_chars_for rules name it: the
    gateway's name for it, else the request's host."""
    facts = flow.metadata.get(MCP_METADATA)
    name = facts.get(McpKey.GATEWAY_SERVER) if isinstance(facts, dict) else None
    return name if isinstance(name, str) else flow.request.pretty_host


def server_key(flow: http.HTTPFlow) -> str:
    """One server as one text: a gateway server by its name, any other by
    its host and port (two servers on one host are two servers)."""
    host, port = _server_key(flow)
    return host if host.startswith("gateway/") else f"{host}:{port}"


def _server_key(flow: http.HTTPFlow) -> tuple[str, int]:
    """The key of a flow's server for remembered request ids: a gateway
    flow's server by its name (all of them go to the one relay), any other
    by its host and port."""
    facts = flow.metadata.get(MCP_METADATA)
    name = facts.get(McpKey.GATEWAY_SERVER) if isinstance(facts, dict) else None
    if isinstance(name, str):
        return (f"gateway/{name}", 0)
    return (flow.request.host, flow.request.port)
