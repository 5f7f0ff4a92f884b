"""The provider's usage report of each answer to a conversation request,
read as the answer passes and put next to obsmask's own figures."""

from __future__ import annotations

import logging
from collections.abc import Callable

from mitmproxy import http

from obsmask_core.conversation.usage.provider_usage import ProviderUsage, usage_from_json
from obsmask_core.conversation.usage.usage_stream import SseUsageReader, usage_from_sse
from obsmask_core.mitm.flows import CONVERSATION_METADATA, add_comment, log_once_sent, where
from obsmask_core.shared.request_record import Key

logger = logging.getLogger(__name__)
USAGE_LINE_PREFIX = "obsmask: provider reported "


def is_event_stream(message: http.Message) -> bool:
    return str(message.headers.get("content-type", "")).startswith("text/event-stream")


class UsageTap:
    """mitmproxy's stream callable: every chunk goes on unchanged (an empty
    one only at the end, since an empty chunk ends a chunked body), and the
    reader sees it too.

    The usage is recorded as soon as the event that completes the provider's
    report has been read, before the chunk goes on: a client that hangs up
    right after reading that event (Codex does) takes nothing from the flow.
    ``read``, when given, is told each time the usage is recorded, before
    that chunk goes on too.
    """

    def __init__(self, flow: http.HTTPFlow, reader: SseUsageReader,
                 read: Callable[[http.HTTPFlow], None] | None = None) -> None:
        self.flow = flow
        self.reader = reader
        self.read = read
        self.recorded: ProviderUsage | None = None

    def __call__(self, chunk: bytes) -> bytes:
        try:
            if chunk:
                self.reader.feed(chunk)
                if self.reader.complete and self.reader.usage != self.recorded:
                    self._record()
            else:
                self.reader.finish()
                if self.recorded is None or self.reader.usage != self.recorded:
                    self._record()
        except Exception:  # the stream must go on whatever happens
            logger.exception("obsmask: cannot read the usage of %s", where(self.flow))
        return chunk

    def cut_short(self, reason: str) -> None:
        """The stream ended without its end (the client or the server went
        away): say so, unless the usage report had been read in full."""
        if self.reader.complete:
            return
        problem = f"the stream was cut before the provider's usage report ({reason})"
        summary = self.flow.metadata.setdefault(CONVERSATION_METADATA, {})
        summary[Key.PROVIDER_USAGE_PROBLEM] = problem
        if self.reader.usage is not None:  # what the first events said
            summary[Key.PROVIDER_USAGE] = self.reader.usage.as_metadata()
        logger.warning("obsmask: %s: %s", where(self.flow), problem)

    def _record(self) -> None:
        usage = self.reader.usage
        record_usage(self.flow, usage, self.reader.problem, log=self.recorded is None)
        self.recorded = usage
        if self.read is not None:
            self.read(self.flow)


def stream_with_usage(response: http.Response, flow: http.HTTPFlow,
                      read: Callable[[http.HTTPFlow], None] | None = None) -> None:
    """Stream the answer through as it comes; the tap reads the provider's
    usage report (its last events) on the way, and tells ``read``."""
    response.stream = UsageTap(flow, SseUsageReader(response.headers.get("content-encoding")),
                               read)


def record_buffered_usage(flow: http.HTTPFlow, response: http.Response) -> None:
    """The usage of an answer that mitmproxy held whole."""
    content = response.get_content(strict=False) or b""
    usage = usage_from_sse(content) if is_event_stream(response) else usage_from_json(content)
    record_usage(flow, usage)


def record_usage(
    flow: http.HTTPFlow, usage: ProviderUsage | None, problem: str | None = None,
    *, log: bool = True,
) -> None:
    """Put the provider's reported usage next to obsmask's own figures: the
    cached input tokens are how a user checks what masking did to the cache.
    Recorded again (a later event with more figures), it replaces its line."""
    summary = flow.metadata.setdefault(CONVERSATION_METADATA, {})
    if usage is None:
        if problem:
            summary[Key.PROVIDER_USAGE_PROBLEM] = problem
        return
    summary[Key.PROVIDER_USAGE] = usage.as_metadata()
    line = usage.comment_line()
    add_comment(flow, line, replacing=USAGE_LINE_PREFIX)
    if log:
        log_once_sent(flow, logger, "%s (%s)", line, where(flow))
