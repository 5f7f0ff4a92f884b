"""The mitmproxy addon that cuts long strings in MCP answers.

MCP traffic is JSON-RPC 2.0 over HTTP: a POST whose body is a JSON-RPC
message, answered with ``application/json`` or ``text/event-stream``, and
GET streams (Streamable HTTP, and the legacy HTTP+SSE transport) whose
events carry messages. Only JSON-RPC responses are ever changed; a body or
event that is not one goes on byte for byte.

Only MCP flows are read (``obsmask_core.mcp.scope`` says which): a gateway
flow, a request with an MCP header or an MCP method, a flow that the
``mcpmask_include`` filter matches, or a GET event stream that begins as
MCP; never one that ``mcpmask_exclude`` matches. Every other JSON-RPC API
(an Ethereum node, a language server...) passes byte for byte. A flow
found MCP says why in its metadata (``"mcp"``: ``gateway``, ``method``,
``header``, ``include`` or ``stream``).

Each response is cut at its own limit: ``mcpmask_max_chars``, or a
``mcpmask_max_chars_for`` rule's for its server and tool, raised to the
ceiling its server declared for that tool (``obsmask_core.mcp.tool_limits``).
With recall on, each cut string's marker carries its recall id and the
whole string goes to the recall store; the recall server's own answers are
never cut.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from mitmproxy import http
from mitmproxy.addonmanager import Loader

from obsmask_core.mcp.cut import TextTruncation
from obsmask_core.mcp.limits import MASKING_SECTION, TruncationLimits
from obsmask_core.mcp.scope import EVERY_RESPONSE, McpAnswers
from obsmask_core.mcp.summary import COMMENT_PREFIX, McpSummary
from obsmask_core.mcp.tool_limits import AnswerLimits, ToolCeilings, declared_ceilings
from obsmask_core.mitm.flows import (
    CONVERSATION_METADATA,
    MARK,
    MCP_METADATA,
    add_comment,
    guarded,
    log_once_sent,
    where,
)
from obsmask_core.mitm.mcp_cuts import AnswerCut, CutOutcome, say_why
from obsmask_core.mitm.mcp_scope import McpScope, server_key, server_name
from obsmask_core.mitm.mcp_stream import SseTap
from obsmask_core.mitm.off_loop import OffLoop
from obsmask_core.mitm.options import add_options, settings_in_force
from obsmask_core.mitm.recall_addon import Recall
from obsmask_core.mitm.settings_addon import FILE_OPTIONS, SettingsFile
from obsmask_core.shared.inflate import can_inflate
from obsmask_core.shared.tokens import TokenCounter
from obsmask_core.shared.truncation import TruncationMarker

logger = logging.getLogger(__name__)

PREFIX = "mcpmask_"
METADATA_KEY = MCP_METADATA
EVENT_STREAM = "text/event-stream"


def _is_event_stream(message: http.Message) -> bool:
    return str(message.headers.get("content-type", "")).lower().startswith(EVENT_STREAM)


def _looks_like_jsonrpc(body: bytes) -> bool:
    """Cheap test before a real scan: JSON that names "jsonrpc"."""
    start = body[:64].lstrip()
    return start[:1] in (b"{", b"[") and b'"jsonrpc"' in body


class McpTruncation:
    """Cuts long strings in JSON-RPC responses to head + marker + tail, on
    every MCP transport."""

    def __init__(self, settings: SettingsFile, tokens: TokenCounter | None = None,
                 recall: Recall | None = None, off_loop: OffLoop | None = None) -> None:
        self.settings = settings
        self.limits = TruncationLimits()
        self.tool_limits = self.limits.tool_limits()
        self.marker = TruncationMarker(self.limits.marker_template)
        self.tokens = tokens or TokenCounter()
        self.scope = McpScope()
        self.recall = recall
        # The ceilings servers declared for their tools (tools/list answers).
        self.ceilings = ToolCeilings()
        # The worker thread for big answers: the conversation addon's, in a proxy.
        self.off_loop = off_loop or OffLoop()
        self._options: set[str] = set(FILE_OPTIONS)

    @property
    def enabled(self) -> bool:
        return self.limits.enabled

    @property
    def recall_on(self) -> bool:
        """Cut strings carry recall ids and go to the store."""
        return self.recall is not None and self.recall.enabled

    def _cut(self, flow: http.HTTPFlow, scope: tuple[str, McpAnswers] | None,
             is_sse: bool) -> AnswerCut:
        """The cut of the flow's answer: the limit of each response by its
        tool, and the ceilings a tools/list answer declares remembered."""
        # Rules name the server as users know it (host or gateway name);
        # ceilings are what one server (host and port) declared.
        key = server_key(flow)

        def read_ceilings(data: bytes) -> None:
            self.ceilings.remember(key, declared_ceilings(data))

        per_message = AnswerLimits(self.tool_limits, server_name(flow), self.scope.tool_of(flow),
                                   lambda tool: self.ceilings.get(key, tool))
        return AnswerCut(
            self.limits, self.marker, EVERY_RESPONSE if scope is None else scope[1],
            per_message, self.recall_on, read_ceilings, None if scope is None else scope[0],
            is_sse, self.scope.stream_decision(flow) if is_sse and scope is None else None)

    def load(self, loader: Loader) -> None:
        self._options.update(add_options(loader, TruncationLimits, PREFIX))

    def configure(self, updated: set[str]) -> None:
        if not updated & self._options:
            return
        config = self.settings.current()
        limits = settings_in_force(TruncationLimits, PREFIX, config, MASKING_SECTION,
                                   lambda: config.settings(TruncationLimits, MASKING_SECTION))
        limits, source = self.settings.switched(limits, PREFIX, config, MASKING_SECTION)
        self.scope.configure(limits)
        self.limits, self.marker = limits, TruncationMarker(limits.marker_template)
        self.tool_limits = limits.tool_limits()
        if not limits.enabled:
            logger.info("obsmask: MCP truncation off (settings: %s)", source)
            return
        rules = len(self.tool_limits.rules)
        logger.info("obsmask: MCP truncation on: strings over %s chars in JSON-RPC responses "
                    "become %s + marker + %s%s (settings: %s)",
                    f"{limits.max_chars:,}", f"{limits.head_chars:,}",
                    f"{limits.tail_chars:,}",
                    f", {rules} max_chars_for rule{'' if rules == 1 else 's'}" if rules else "",
                    source)

    def running(self) -> None:
        self.tokens.start_loading()

    def request(self, flow: http.HTTPFlow) -> None:
        """Remember which flows post MCP methods, and the tools they call
        (the gateway's flows are known to be MCP already: only their tools
        are noted; a flow read from a file was decided then)."""
        facts = flow.metadata.get(MCP_METADATA)
        # A request the conversation addon read is an LLM request, not an
        # MCP call: decoding and scanning its big body again would be work
        # on the event loop for nothing.
        if (flow.request.method != "POST" or Recall.answered(flow)
                or CONVERSATION_METADATA in flow.metadata
                or (isinstance(facts, dict) and "mcp" in facts)):
            return
        with guarded(flow, "forwarded unchanged"):
            body = flow.request.get_content(strict=False) or b""
            if _looks_like_jsonrpc(body):
                self.scope.note_request(flow, body)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        response = flow.response
        # A whole body already (the gateway's own answers) is the response
        # hook's: a stream callable would never see it.
        if (response is None or response.stream or response.raw_content is not None
                or not _is_event_stream(response) or Recall.answered(flow)):
            return
        with guarded(flow, "streamed unchanged"):
            self._stream(flow, response)

    def _stream(self, flow: http.HTTPFlow, response: http.Response) -> None:
        scope = self.scope.of(flow)
        if scope is None and not self.scope.may_be_stream(flow):
            return  # not MCP: mitmproxy handles it as it would without obsmask
        if not self.enabled:
            # Unchanged, but still streamed: held whole by mitmproxy, a GET
            # stream would never reach the client at all.
            response.stream = True
            return
        encoding = response.headers.get("content-encoding")
        if encoding and scope is None:
            # A compressed GET stream of some site: decoding it to look for
            # JSON-RPC would change its headers for nothing.
            return
        if not can_inflate(encoding):
            response.stream = True
            logger.warning("obsmask: %s streamed unchanged: cannot decode content-encoding "
                           "%r on the fly", where(flow), encoding)
            return
        if scope is not None:
            say_why(flow, scope[0])
        truncator = self._cut(flow, scope, is_sse=True).truncator(encoding)
        # Cut events make the body shorter than any announced length (the
        # client would wait for the rest); a compressed stream goes out
        # decoded. Without a length, mitmproxy ends the body by closing.
        response.headers.pop("content-length", None)
        if encoding:
            del response.headers["content-encoding"]
        response.stream = SseTap(flow, truncator, self.record_cuts)

    def response(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        """Cut a buffered answer: at once, or, for a big one, on a worker
        thread, returning what mitmproxy awaits before it sends the answer
        on (the event loop serves every other flow meanwhile)."""
        if ((response := flow.response) is None or response.stream or not self.enabled
                or Recall.answered(flow)):
            return None
        pending: Awaitable[None] | None = None
        with guarded(flow, "answered unchanged"):
            pending = self._truncate_buffered(flow, response)
        return pending

    def _truncate_buffered(self, flow: http.HTTPFlow,
                           response: http.Response) -> Awaitable[None] | None:
        if not response.raw_content:
            return None
        scope = self.scope.of(flow)
        is_sse = _is_event_stream(response)
        if scope is None and not (is_sse and self.scope.may_be_stream(flow)):
            return None  # not MCP: byte for byte
        cut = self._cut(flow, scope, is_sse)
        # A big answer is cut on the worker thread that conversation masking
        # uses too (one bounded pool: mitm/off_loop.py), while every other
        # flow moves; the flow is changed back on the loop.
        if self.off_loop.takes(response):
            return self._truncate_off_loop(flow, response, cut)
        self._apply(flow, response, cut, self.off_loop.without_collector(lambda: cut.run(response)))
        return None

    async def _truncate_off_loop(self, flow: http.HTTPFlow, response: http.Response,
                                 cut: AnswerCut) -> None:
        with guarded(flow, "answered unchanged"):
            answer = await self.off_loop.run(lambda: cut.run(response))
            self._apply(flow, response, cut, answer)

    def _apply(self, flow: http.HTTPFlow, response: http.Response, cut: AnswerCut,
               answer: CutOutcome) -> None:
        """Put what a cut came to on the flow (on the event loop): the new
        body, the summary and the log lines."""
        if not answer.read:
            if answer.undecodable is not None and cut.why is not None:
                # The decoder's type only: mitmproxy's message quotes the body.
                logger.warning("obsmask: MCP answer to %s forwarded unchanged: cannot decode "
                               "content-encoding %r (%s)", where(flow),
                               response.headers.get("content-encoding", ""),
                               answer.undecodable)
            return
        if cut.why is not None:
            say_why(flow, cut.why)
        if cut.decision is not None and cut.decision.is_mcp:
            say_why(flow, "stream")
        if answer.not_jsonrpc is not None:
            # A 202 "Accepted" (text) to a notification is no answer to read.
            is_json = "json" in response.headers.get("content-type", "").lower()
            if cut.why is not None and is_json:
                logger.warning("obsmask: MCP answer to %s forwarded unchanged: %s",
                               where(flow), answer.not_jsonrpc)
            return
        if answer.body is None:
            return
        flow.backup()
        answer.body.apply_to(response)
        self.record_cuts(flow, McpSummary("sse" if cut.is_sse else "json"),
                         answer.truncations)

    def record_cuts(self, flow: http.HTTPFlow, summary: McpSummary,
                    truncations: list[TextTruncation]) -> None:
        """Add cuts to the flow's summary: its metadata, comment and mark, and
        one log line per cut message. Called once for a buffered answer and
        once per rewritten event of a stream, so the figures add up. With
        recall on, the whole of each cut string goes to the store."""
        if self.recall is not None:  # cut with recall on: ids and originals
            for truncation in truncations:
                for cut in truncation.cuts:
                    if cut.recall_id is not None and cut.original is not None:
                        self.recall.keep(cut.recall_id, cut.original)
        for message in summary.add(truncations, self.marker, self.tokens):
            log_once_sent(flow, logger, "obsmask: %s", message.log_line(where(flow)))
        flow.metadata.setdefault(MCP_METADATA, {}).update(summary.as_metadata())
        add_comment(flow, summary.comment_line(), replacing=COMMENT_PREFIX)
        flow.marked = MARK

