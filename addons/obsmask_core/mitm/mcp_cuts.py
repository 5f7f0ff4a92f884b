"""One MCP answer's cut, decided on the event loop before any of it runs:
for a buffered answer (on the loop or the worker thread), or the truncator
of an event stream."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mitmproxy import http

from obsmask_core.mcp.cut import (
    Cut,
    NothingToCut,
    NotJsonRpc,
    TextTruncation,
    truncate_jsonrpc_body,
)
from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.mcp.scope import McpAnswers, StreamDecision
from obsmask_core.mcp.sse_rewrite import SseTruncator, truncate_sse_body
from obsmask_core.mcp.tool_limits import AnswerLimits
from obsmask_core.mitm.body_encoding import EncodedBody, encoded
from obsmask_core.mitm.flows import MCP_METADATA
from obsmask_core.shared.truncation import TruncationMarker


def say_why(flow: http.HTTPFlow, reason: str) -> None:
    """Record why the flow is MCP (the first reason found stays)."""
    flow.metadata.setdefault(MCP_METADATA, {}).setdefault("mcp", reason)


@dataclass
class CutOutcome:
    """What cutting a buffered answer came to: its new raw body and headers
    (None: it goes out unchanged), and why it was not read, if it was not."""

    body: EncodedBody | None = None
    truncations: list[TextTruncation] = field(default_factory=list)
    read: bool = True  # False: the body could not be decoded (or is streamed)
    undecodable: str | None = None  # the decoder's error type
    not_jsonrpc: str | None = None  # why the body is not JSON-RPC


@dataclass
class AnswerCut:
    """Cutting one answer, with everything decided on the event loop
    beforehand: ``run`` changes neither the flow nor the log, so it may run
    on a worker thread (ceilings go to a ToolCeilings, which is safe between
    threads). It reads the flow's request, for the names of the tools
    called (``per_message``), which nothing changes while the answer waits
    for its hook."""

    limits: TruncationLimits
    marker: TruncationMarker
    answers: McpAnswers
    per_message: AnswerLimits
    recall: bool
    read_ceilings: Callable[[bytes], None]
    why: str | None  # why the flow is MCP, when its request told
    is_sse: bool
    decision: StreamDecision | None

    def truncator(self, encoding: str | None) -> SseTruncator:
        """The truncator of an event stream that comes ``encoding``-encoded."""
        return SseTruncator(self.limits, encoding, self.marker, answers=self.answers,
                            decision=self.decision, per_message=self.per_message,
                            recall=self.recall, read_ceilings=self.read_ceilings)

    def run(self, response: http.Response) -> CutOutcome:
        try:
            content = response.get_content()
        except ValueError as e:
            return CutOutcome(read=False, undecodable=type(e.__context__ or e).__name__)
        if content is None:
            return CutOutcome(read=False)
        if self.is_sse:
            outcome = truncate_sse_body(content, self.limits, self.marker, self.answers,
                                        self.decision, per_message=self.per_message,
                                        recall=self.recall, read_ceilings=self.read_ceilings)
            new_body, truncations = outcome.body, outcome.cuts
        else:
            self.read_ceilings(content)
            match truncate_jsonrpc_body(content, self.limits, self.marker, self.answers,
                                        per_message=self.per_message, recall=self.recall):
                case Cut(body=cut_body, truncation=truncation):
                    new_body, truncations = cut_body, [truncation]
                case NotJsonRpc(reason=reason):
                    return CutOutcome(not_jsonrpc=reason)
                case NothingToCut():
                    return CutOutcome()
        if new_body is None:
            return CutOutcome()
        # Encode (compress again, if the server did) apart from the flow: if
        # that fails, the flow has not been touched.
        return CutOutcome(encoded(response, new_body), truncations)
