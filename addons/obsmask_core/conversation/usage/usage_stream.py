"""The provider's usage read from a streamed answer (``text/event-stream``),
chunk by chunk as the bytes pass through the proxy, in bounded memory.

A streamed answer reports its usage in its last events (see
``obsmask_core.conversation.usage.provider_usage`` for where each format puts
it). :class:`SseUsageReader` reads them without holding the answer, and
:func:`usage_from_sse` reads a whole streamed answer already in memory.
"""

from __future__ import annotations

import json
import zlib

from obsmask_core.conversation.usage.provider_usage import (
    ProviderUsage,
    ends_usage_report,
    usage_in_object,
)
from obsmask_core.shared.inflate import Inflater, can_inflate, inflater_for, normalised_encoding
from obsmask_core.shared.sse import SseLineSplitter, data_value

# One event's data is kept until the blank line that ends it; beyond this
# size the event is dropped (see SseUsageReader). The largest usage-bearing
# event is the Responses API's ``response.completed``, which repeats the whole
# response (instructions, tool definitions, output): typically tens of KiB.
MAX_EVENT_BYTES = 1 << 20


class SseUsageReader:
    """Reads the provider's usage from a streamed answer as its bytes pass.

    Feed the response's transport chunks in order with :meth:`feed`, call
    :meth:`finish` at the end of the body, and read :attr:`usage`; once
    :attr:`complete` is true the usage is final, even if the stream never
    ends (a client that hangs up as soon as it has read the last event). Events are
    parsed as the SSE specification (WHATWG HTML) says (``\\n``, ``\\r\\n`` and
    ``\\r`` line ends, ``:`` comments, several ``data:`` lines joined with
    ``\\n``, one leading BOM ignored); each event's data is read as JSON and
    its usage, if any, merged into what was seen before (later fields win).
    ``[DONE]`` and anything else that is not JSON are skipped.

    Memory stays bounded whatever the stream: only the current incomplete
    line and event are kept, and an event larger than ``max_event_bytes`` is
    dropped whole (its usage, if it had any, is lost), the reader
    resynchronising at the blank line that ends it. Comment lines are not
    kept at all. Work is proportional to the bytes fed (after decompression).

    ``content_encoding`` is the response's Content-Encoding header, because
    a streamed body passes through the proxy still encoded: ``gzip`` and
    ``deflate`` are decompressed incrementally; ``br``, ``zstd``, stacked or
    unknown encodings are not read at all (usage stays None and
    :attr:`problem` says why). Nothing here raises on bad input.
    """

    def __init__(
        self, content_encoding: str | None = None, *, max_event_bytes: int = MAX_EVENT_BYTES
    ) -> None:
        self._max_event_bytes = max_event_bytes
        self._usage: ProviderUsage | None = None
        self._complete = False
        self._problem: str | None = None
        # A line goes out as soon as it ends (a "\r" last in a chunk ends it);
        # comments are never held. The splitter holds the incomplete line,
        # which feed keeps under the cap together with the event's data.
        self._lines = SseLineSplitter(eager_cr=True, comments=False)
        # The data of the event being received.
        self._data = bytearray()
        self._has_data = False
        self._dropping = False  # the event outgrew the cap: skip to its end
        self._inflater: Inflater | None = None
        self._enabled = True
        if can_inflate(content_encoding):
            self._inflater = inflater_for(content_encoding)
        else:
            encoding = normalised_encoding(content_encoding)
            self._disable(f"content-encoding {encoding!r} is not read")

    @property
    def usage(self) -> ProviderUsage | None:
        """The usage reported so far (merged over events), or None."""
        return self._usage

    @property
    def complete(self) -> bool:
        """Whether the event that completes the usage report has been read:
        the usage is final, whatever happens to the stream afterwards."""
        return self._complete

    @property
    def problem(self) -> str | None:
        """Why the stream is not (or no longer) being read, or None if it is."""
        return self._problem

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for the incomplete line and event: at most the cap."""
        return self._lines.held + len(self._data)

    def feed(self, chunk: bytes) -> None:
        """Read one transport chunk (any size, split anywhere)."""
        if not self._enabled or not chunk:
            return
        if self._inflater is None:
            self._feed_plain(chunk)
            return
        try:
            pieces = self._inflater.decompress(chunk)
        except zlib.error as e:
            self._disable(f"corrupt compressed body: {e}")
            return
        for piece in pieces:
            self._feed_plain(piece)

    def finish(self) -> None:
        """Read what is left at the end of the body.

        The SSE specification drops an event the stream ends in the middle
        of; we read it anyway if its data is complete JSON, because a server
        that omits the final blank line still reported the usage it sent.
        """
        if self._enabled and self._inflater is not None:
            try:
                pieces = self._inflater.flush()
            except zlib.error as e:
                self._disable(f"corrupt compressed body: {e}")
                pieces = []
            for piece in pieces:
                self._feed_plain(piece)
        if not self._enabled:
            return
        for line in self._lines.finish():
            self._read_line(line)
        last = self._lines.take_rest()  # a last line that never ended
        if last:
            self._read_line(last)
        self._end_event()

    def _disable(self, problem: str) -> None:
        self._enabled = False
        self._problem = problem
        self._lines.take_rest()
        self._data = bytearray()

    def _feed_plain(self, chunk: bytes) -> None:
        for line in self._lines.feed(chunk):
            self._read_line(line)
        held = self._lines.held
        if held and (self._dropping or held + len(self._data) > self._max_event_bytes):
            self._drop_event()
            self._lines.skip_line()

    def _read_line(self, line: bytes) -> None:
        """One line of the stream (never a comment), its line end included."""
        content = line.rstrip(b"\r\n")
        if not content:
            self._end_event()
            return
        if self._dropping:
            return
        if len(content) + len(self._data) > self._max_event_bytes:
            self._drop_event()
            return
        value = data_value(content)
        if value is None:
            return  # event, id, retry and unknown fields do not matter here
        if self._has_data:
            self._data += b"\n"
        self._data += value
        self._has_data = True

    def _drop_event(self) -> None:
        """The event outgrew the cap: forget its data and skip to its end."""
        self._dropping = True
        self._data = bytearray()
        self._has_data = False

    def _end_event(self) -> None:
        data = bytes(self._data) if self._has_data and not self._dropping else None
        self._data.clear()
        self._has_data = False
        self._dropping = False
        # Most events (text deltas) carry no usage: skip parsing them.
        if data is None or b'"usage"' not in data:
            return
        try:
            parsed: object = json.loads(data.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return
        usage = usage_in_object(parsed)
        if usage is not None:
            self._usage = usage if self._usage is None else self._usage.updated_by(usage)
            self._complete = self._complete or ends_usage_report(parsed)


def usage_from_sse(body: bytes, content_encoding: str | None = None) -> ProviderUsage | None:
    """The usage of a whole streamed answer already in memory (a buffered flow)."""
    reader = SseUsageReader(content_encoding)
    reader.feed(body)
    reader.finish()
    return reader.usage
