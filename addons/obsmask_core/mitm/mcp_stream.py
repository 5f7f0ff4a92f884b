"""mitmproxy's stream callable for an MCP event stream: each chunk is
rewritten event by event and goes on at once."""

from __future__ import annotations

import logging
from collections.abc import Callable

from mitmproxy import http

from obsmask_core.mcp.cut import TextTruncation
from obsmask_core.mcp.sse_rewrite import SseTruncator
from obsmask_core.mcp.summary import McpSummary
from obsmask_core.mitm.flows import where
from obsmask_core.mitm.mcp_cuts import say_why

logger = logging.getLogger(__name__)

RecordCuts = Callable[[http.HTTPFlow, McpSummary, list[TextTruncation]], None]


class SseTap:
    """Returns a list of byte strings for every chunk, never ``b""`` in the
    middle of a stream (mitmproxy would write it as the end of a chunked
    body). After an internal error the rest of the stream passes uncut, with
    nothing lost."""

    def __init__(self, flow: http.HTTPFlow, truncator: SseTruncator,
                 record_cuts: RecordCuts) -> None:
        self.flow = flow
        self.truncator = truncator
        self.record_cuts = record_cuts
        self.summary = McpSummary("sse")
        self.failed = False
        # A stream not known to be MCP: the flow says so once the stream tells.
        self.undecided = truncator.decision is not None

    def __call__(self, chunk: bytes) -> list[bytes]:
        if self.failed:
            return self.truncator.decode_only(chunk)
        try:
            pieces = self.truncator.feed(chunk) if chunk else self.truncator.finish()
            if self.undecided and self.truncator.decision is not None and (
                    self.truncator.decision.is_mcp is not None):
                self.undecided = False
                if self.truncator.decision.is_mcp:
                    say_why(self.flow, "stream")
            cuts = self.truncator.take_cuts()
            if cuts:
                self.record_cuts(self.flow, self.summary, cuts)
            if self.truncator.problem and not chunk:
                logger.warning("obsmask: MCP stream %s: %s", where(self.flow),
                               self.truncator.problem)
            return pieces
        except Exception:  # the stream must go on whatever happens
            self.failed = True
            logger.exception("obsmask: internal error in the MCP stream %s, passed on uncut "
                             "from here", where(self.flow))
            held = self.truncator.release()
            return ([held] if held else []) + self.truncator.decode_only(chunk)
