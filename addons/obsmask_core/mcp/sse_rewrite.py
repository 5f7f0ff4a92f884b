"""Cut long strings in JSON-RPC messages carried by a server-sent events stream.

MCP servers answer a POST with ``text/event-stream`` by default, and the
legacy HTTP+SSE transport carries every result on a GET stream that never
ends. So the stream is rewritten as it passes, event by event: every line
that is not a ``data:`` line goes out as soon as it is complete, and the
``data:`` lines of an event are held only until the blank line that ends
the event (no client acts on an event before that line). An event whose
data is a JSON-RPC response with long strings goes out rewritten; every
other event goes out as the bytes that came in.

The stream is cut into lines by ``obsmask_core.shared.sse`` (the SSE
specification's framing), which hands out every byte as it came: line ends,
a leading byte order mark and comments go out untouched. Several ``data:``
lines of one event are joined with ``\\n`` to read the event's JSON.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

from obsmask_core.mcp.cut import TextTruncation, truncate_jsonrpc_text, uniform_limits
from obsmask_core.mcp.jsonrpc_scan import scan_jsonrpc
from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.mcp.scope import EVERY_RESPONSE, McpAnswers, StreamDecision
from obsmask_core.mcp.tool_limits import AnswerLimits, lists_tools
from obsmask_core.shared.inflate import can_inflate, inflater_for
from obsmask_core.shared.sse import SseLineSplitter, data_value, is_data_line
from obsmask_core.shared.truncation import TruncationMarker

# An event's data is held until the event ends; a bigger event goes out as it
# came, uncut (the proxy must not hold unbounded memory for one client).
MAX_EVENT_BYTES = 256 << 20


class SseTruncator:
    """Feed the transport chunks of one stream in order; each call returns the
    bytes to send on now (a list, possibly empty: an empty byte string in the
    middle of a chunked body would end it).

    With a Content-Encoding (gzip or deflate) the output is the decoded
    stream: the caller must drop the Content-Encoding header.

    Only the responses that ``answers`` covers are cut, each at its own
    limit (``per_message``); with ``recall`` each cut string carries its
    recall id and original. With a ``decision`` (a stream not known to be
    MCP), nothing is cut until it says MCP; once it says not MCP, the rest
    of the stream passes as it comes, unread. ``read_ceilings`` is given the
    data of each MCP event that may be a tools/list answer (``lists_tools``
    in ``obsmask_core.mcp.tool_limits``).
    """

    def __init__(
        self,
        limits: TruncationLimits,
        content_encoding: str | None = None,
        marker: TruncationMarker | None = None,
        max_event_bytes: int = MAX_EVENT_BYTES,
        answers: McpAnswers = EVERY_RESPONSE,
        decision: StreamDecision | None = None,
        *,
        per_message: AnswerLimits | None = None,
        recall: bool = False,
        read_ceilings: Callable[[bytes], None] | None = None,
    ) -> None:
        if not can_inflate(content_encoding):
            raise ValueError(f"cannot decode content-encoding {content_encoding!r}")
        self.limits = limits
        self.per_message = per_message or uniform_limits(limits)
        self.recall = recall
        self.read_ceilings = read_ceilings
        self.marker = marker or TruncationMarker(limits.marker_template)
        self._inflater = inflater_for(content_encoding)
        self._max_event_bytes = max_event_bytes
        self._lines = SseLineSplitter()  # exact bytes: a last "\r" waits for its "\n"
        self._held: list[bytes] = []  # lines of the current event, from its first data line
        self._held_bytes = 0
        self._oversized = False  # the current event is too big: it passes uncut
        self.cuts: list[TextTruncation] = []  # rewritten events not yet taken by the caller
        self.problem: str | None = None
        self.events = 0
        self.answers = answers
        self.decision = decision

    @property
    def passing(self) -> bool:
        """The stream was found not to be MCP: the rest goes on unread."""
        return self.decision is not None and self.decision.is_mcp is False

    def _pass_on(self, chunk: bytes) -> list[bytes]:
        held = self.release()
        return self._emit(([held] if held else []) + self.decode_only(chunk))

    def feed(self, chunk: bytes) -> list[bytes]:
        if self.passing:
            return self._pass_on(chunk)
        if self._inflater is None:
            return self._emit(self._plain(chunk))
        try:
            pieces = self._inflater.decompress(chunk)
        except zlib.error as e:
            return self._fail(f"corrupt compressed stream ({e})")
        return self._emit([part for piece in pieces for part in self._plain(piece)])

    def finish(self) -> list[bytes]:
        """The end of the stream: whatever is still held goes out as it is (a
        client drops an event that the stream ends before completing)."""
        if self.passing:
            return self._pass_on(b"")
        out: list[bytes] = []
        if self._inflater is not None:
            try:
                for piece in self._inflater.flush():
                    out.extend(self._plain(piece))
            except zlib.error as e:
                return self._fail(f"corrupt compressed stream ({e})")
        for line in self._lines.finish():
            self._line_done(line, out)
        out.extend(self._held)
        out.append(self._lines.take_rest())
        self._held = []
        return self._emit(out)

    def decode_only(self, chunk: bytes) -> list[bytes]:
        """``chunk`` decoded but not read (after a failure, for the rest of a
        stream whose Content-Encoding is already gone)."""
        if self._inflater is None:
            return [chunk] if chunk else []
        try:
            pieces = self._inflater.decompress(chunk) if chunk else self._inflater.flush()
        except zlib.error:
            return []
        return self._emit(pieces)

    def release(self) -> bytes:
        """Everything held back, as it came: after a failure, the caller sends
        it before the chunk that failed, which it sends again as it came."""
        held = b"".join(self._held) + self._lines.take_rest()
        self._held = []
        return held

    def take_cuts(self) -> list[TextTruncation]:
        cuts, self.cuts = self.cuts, []
        return cuts

    def _fail(self, problem: str) -> list[bytes]:
        self.problem = problem
        self._held = []
        self._lines.take_rest()
        return []

    @staticmethod
    def _emit(pieces: list[bytes]) -> list[bytes]:
        joined = b"".join(pieces)
        return [joined] if joined else []

    def _plain(self, data: bytes) -> list[bytes]:
        """Handle each line that decoded ``data`` completes."""
        lines = self._lines.feed(data)
        bom = self._lines.take_bom()
        out: list[bytes] = [bom] if bom else []
        try:
            for line in lines:
                self._line_done(line, out)
        except Exception:
            # The caller sends the chunk that failed on as it came (see
            # release): the unended line held now is the end of that chunk.
            self._lines.take_rest()
            raise
        return out

    def _line_done(self, line: bytes, out: list[bytes]) -> None:
        content = line.rstrip(b"\r\n")
        if not content:
            self._event_done(line, out)
            return
        is_data = is_data_line(content)
        if (not is_data and self.decision is not None and self.decision.is_mcp is None
                and content.startswith(b"event:")):
            name = content[6:]
            self.decision.event_type((name[1:] if name[:1] == b" " else name).decode(
                "utf-8", "replace"))
        if not self._held and not is_data:
            out.append(line)  # comments, event:, id:, retry: lines go on at once
            return
        if self._oversized:
            out.append(line)
            return
        self._held.append(line)
        self._held_bytes += len(line)
        if self._held_bytes > self._max_event_bytes:
            self._oversized = True
            self.problem = (
                f"an event of more than {self._max_event_bytes:,} bytes passed uncut"
            )
            out.extend(self._held)
            self._held, self._held_bytes = [], 0

    def _event_done(self, blank_line: bytes, out: list[bytes]) -> None:
        held, self._held, self._held_bytes = self._held, [], 0
        self._oversized = False
        if held:
            self.events += 1
            out.extend(self._rewritten(held))
        out.append(blank_line)

    def _rewritten(self, lines: list[bytes]) -> list[bytes]:
        values: list[bytes] = []
        data_lines: list[int] = []  # indexes of the data lines in ``lines``
        for index, line in enumerate(lines):
            value = data_value(line.rstrip(b"\r\n"))
            if value is not None:
                data_lines.append(index)
                values.append(value)
        data = b"\n".join(values)
        if self.decision is not None and self.decision.is_mcp is not True:
            self._decide(data)
            if not self.decision.is_mcp:
                return lines
        if self.read_ceilings is not None and lists_tools(data):
            self.read_ceilings(data)
        scan_chars = self.per_message.scan_chars
        if scan_chars is None or len(data) <= scan_chars or b'"jsonrpc"' not in data:
            return lines
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return lines
        truncation = truncate_jsonrpc_text(text, self.limits, self.marker, self.answers,
                                           per_message=self.per_message, recall=self.recall)
        if truncation.text is None:
            return lines
        # A cut string is written with escapes, never with a raw line end, so
        # the new data has one line per data line: each goes where its line
        # was, with that line's own ending (a "\r" put where a "\n" was would
        # join the blank line after it into one "\r\n", and the event would
        # not end).
        parts = truncation.text.split("\n")
        if len(parts) != len(data_lines):
            return lines
        self.cuts.append(truncation)
        rebuilt = list(lines)
        for index, part in zip(data_lines, parts, strict=True):
            line = lines[index]
            rebuilt[index] = b"data: " + part.encode("utf-8") + line[len(line.rstrip(b"\r\n")):]
        return rebuilt

    def _decide(self, data: bytes) -> None:
        """Let the decision read an event's data, if it is JSON-RPC."""
        if self.decision is None or self.decision.is_mcp is not None or b'"jsonrpc"' not in data:
            return
        try:
            self.decision.message(scan_jsonrpc(data.decode("utf-8")))
        except UnicodeDecodeError:
            return


@dataclass
class SseBodyTruncation:
    body: bytes | None  # None: nothing was cut, the original goes out
    cuts: list[TextTruncation]  # one per rewritten event
    problem: str | None


def truncate_sse_body(
    body: bytes, limits: TruncationLimits, marker: TruncationMarker | None = None,
    answers: McpAnswers = EVERY_RESPONSE, decision: StreamDecision | None = None, *,
    per_message: AnswerLimits | None = None, recall: bool = False,
    read_ceilings: Callable[[bytes], None] | None = None,
) -> SseBodyTruncation:
    """The whole-body form, for a stream that was buffered (decoded body)."""
    truncator = SseTruncator(limits, marker=marker, answers=answers, decision=decision,
                             per_message=per_message, recall=recall,
                             read_ceilings=read_ceilings)
    out = b"".join(truncator.feed(body) + truncator.finish())
    cuts = truncator.take_cuts()
    return SseBodyTruncation(out if cuts else None, cuts, truncator.problem)
