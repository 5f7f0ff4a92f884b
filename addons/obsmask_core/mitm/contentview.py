"""obsmask's content view in mitmweb, the mitmproxy console and mitmdump
(``--flow-detail 3``): a masked request, or a cut MCP answer, shown as what
was done to each result and why, and the original beside what went out as a
diff.

Its render priority makes mitmproxy's "auto" choose it for the messages
obsmask changed (a masked request; a cut answer, or, when the cut answer
was streamed and so has no body, its request), and never for another one.
The pages are made by the pure modules (``conversation/view/``, with the
masked request's page in ``masking_page.py``, and ``mcp/explain.py``);
here they are only handed to mitmproxy, through the API
the installed version offers: mitmproxy 12's ``Contentview`` (registered
with ``contentviews.add``, which keeps it to the end), or mitmproxy 11's
``View`` (added on load, removed on done). The view never raises into
mitmproxy: a failure becomes a short text, and its traceback goes to the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Literal, Protocol, TypeVar, cast

from mitmproxy import contentviews, ctx, http
from mitmproxy.addonmanager import Loader
from mitmproxy.contentviews.base import View as LegacyView
from mitmproxy.flow import Flow

from obsmask_core.conversation.turns.wire_formats import FORMATS
from obsmask_core.conversation.view.explain import (
    MaskingExplanation,
    NotExplained,
    explain_masking,
)
from obsmask_core.conversation.view.masking_page import MaskingRecord, masking_page
from obsmask_core.mcp.explain import CutRecord, cut_page, explain_cuts, streamed_page
from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.flows import (
    CONVERSATION_METADATA,
    MCP_METADATA,
    original_request,
    original_response,
    where,
)
from obsmask_core.mitm.mcp_addon import McpTruncation
from obsmask_core.shared.request_record import TRUNCATED, Action, Key
from obsmask_core.shared.truncation import DEFAULT_MARKER
from obsmask_core.shared.view_text import LineKind, ViewLine, page_text, pretty_body, text, title

logger = logging.getLogger(__name__)

NAME = "obsmask"
# Above every view mitmproxy ships (the highest answers 2), so that "auto"
# chooses this one for the messages it is for; 0 for every other message.
PRIORITY = 3.0
# What the page of a message is.
PageKind = Literal["masked request", "cut answer", "streamed cut"]
# mitmproxy 11's styles (mitmweb's and the console's) for each kind of line.
STYLES: Mapping[LineKind, str] = MappingProxyType({
    "title": "header",
    "heading": "header",
    "text": "text",
    "context": "text",
    "hunk": "offset",
    "removed": "Token_Literal_String",
    "added": "Token_Name_Tag",
})
_Addon = TypeVar("_Addon")


def _peer(kind: type[_Addon]) -> _Addon | None:
    """The running addon of that class (mitmproxy names an addon by its
    class, lower case), or None when it is not loaded."""
    try:
        found = ctx.master.addons.get(kind.__name__.lower())
    except AttributeError:  # no master: outside mitmproxy
        return None
    return found if isinstance(found, kind) else None


def _action(flow: Flow, key: str) -> object:
    facts = flow.metadata.get(key)
    return facts.get(Key.ACTION) if isinstance(facts, dict) else None


def page_kind(flow: Flow | None, message: object) -> PageKind | None:
    """Which page the message gets, or None: not one of obsmask's."""
    if not isinstance(flow, http.HTTPFlow) or message is None:
        return None
    if message is flow.request:
        if _action(flow, CONVERSATION_METADATA) == Action.MASKED:
            return "masked request"
        if (_action(flow, MCP_METADATA) == TRUNCATED and flow.response is not None
                and flow.response.raw_content is None):
            return "streamed cut"
    elif message is flow.response and _action(flow, MCP_METADATA) == TRUNCATED:
        return "cut answer"
    return None


def _backup(flow: http.HTTPFlow, part: Literal["request", "response"]) -> bytes | None:
    """The body of the request or answer as it was before obsmask changed it."""
    message = original_request(flow) if part == "request" else original_response(flow)
    return None if message is None else message.get_content(strict=False)


def _comment(flow: http.HTTPFlow) -> list[str]:
    return [line for line in (flow.comment or "").split("\n") if line]


def _decoded(body: bytes) -> str:
    return body.decode("utf-8", "replace")


def page(flow: Flow | None, message: object, data: bytes) -> tuple[str, list[ViewLine]]:
    """The description and the lines of a message's page; a message that is
    not one of obsmask's says so, above its body."""
    kind = page_kind(flow, message)
    if kind is None or not isinstance(flow, http.HTTPFlow):
        return "obsmask: not changed", [
            title("obsmask: this message was not masked or cut by obsmask"), text(""),
            *(text(line) for line in pretty_body(_decoded(data)).splitlines())]
    if kind == "masked request":
        return "obsmask: masked request", _masking_page(flow, data)
    facts = flow.metadata[MCP_METADATA]
    record = CutRecord.of(facts if isinstance(facts, dict) else {})
    if kind == "streamed cut":
        return "obsmask: MCP answer cut as it streamed", streamed_page(
            record, _decoded(data), _comment(flow))
    assert flow.response is not None
    original = _backup(flow, "response")
    mcp = _peer(McpTruncation)
    event_stream = flow.response.headers.get("content-type", "").lower().startswith(
        "text/event-stream")
    cut_body, before = _decoded(data), None if original is None else _decoded(original)
    explanation = explain_cuts(cut_body, before, mcp.marker if mcp else DEFAULT_MARKER,
                               event_stream=event_stream)
    return "obsmask: cut MCP answer", cut_page(explanation, record, cut_body, before,
                                               event_stream=event_stream,
                                               comment=_comment(flow))


def _masking_page(flow: http.HTTPFlow, data: bytes) -> list[ViewLine]:
    facts = flow.metadata[CONVERSATION_METADATA]
    record = MaskingRecord.of(facts if isinstance(facts, dict) else {})
    fmt = FORMATS.get(record.format or "")
    original = _backup(flow, "request")
    explanation: MaskingExplanation | NotExplained
    if original is None:
        explanation = NotExplained("the flow holds no original request (no backup)")
    elif fmt is None:
        explanation = NotExplained(f"the flow's metadata names no known format "
                                   f"({record.format!r})")
    else:
        conversation = _peer(ConversationMasking)
        policy = conversation.policy if conversation is not None else None
        recall = conversation.recall if conversation is not None else None
        explanation = explain_masking(original, data, fmt, policy,
                                      recall=recall is not None and recall.enabled,
                                      table=record.table(),
                                      refetch_calls=record.refetches.new_calls
                                      if record.refetches else ())
    return masking_page(explanation, record, None if original is None else _decoded(original),
                        _decoded(data), _comment(flow))


def safe_page(flow: Flow | None, message: object, data: bytes) -> tuple[str, list[ViewLine]]:
    """``page``, or a short text saying it failed (the traceback to the log)."""
    try:
        return page(flow, message, data)
    except Exception as e:
        logger.exception("obsmask: the content view failed on %s",
                         where(flow) if isinstance(flow, http.HTTPFlow) else "a message")
        return "obsmask: failed", [
            title(f"obsmask: this view failed ({type(e).__name__}); the traceback is in "
                  "mitmproxy's event log"),
        ]


def safe_priority(flow: Flow | None, message: object) -> float:
    """PRIORITY for obsmask's messages, 0 for the others (and on any error)."""
    try:
        return PRIORITY if page_kind(flow, message) is not None else 0.0
    except Exception:
        logger.exception("obsmask: the content view's render priority failed")
        return 0.0


# mitmproxy 11: a View -----------------------------------------------------------------

Line = list[tuple[str, str | bytes]]


def legacy_view() -> LegacyView:
    """The view for mitmproxy 11's API (lines of (style, text)); its class
    is made only there, since mitmproxy 12 warns when View is subclassed."""

    class ObsmaskLegacyView(LegacyView):
        name = NAME

        def __call__(self, data: bytes, *, content_type: str | None = None,
                     flow: Flow | None = None, http_message: http.Message | None = None,
                     **unknown_metadata: object) -> tuple[str, Iterator[Line]]:
            description, lines = safe_page(flow, http_message, data)
            # mitmweb 11 draws nothing for an empty line: a space keeps it.
            styled: list[Line] = [[(STYLES[line.kind], line.text or " ")] for line in lines]
            return description, iter(styled)

        def render_priority(self, data: bytes, *, content_type: str | None = None,
                            flow: Flow | None = None, http_message: http.Message | None = None,
                            **unknown_metadata: object) -> float:
            return safe_priority(flow, http_message)

    return ObsmaskLegacyView()


# mitmproxy 12: a Contentview -------------------------------------------------------------


class Metadata(Protocol):
    """What the view reads of mitmproxy 12's ``contentviews.Metadata``."""

    @property
    def flow(self) -> Flow | None: ...
    @property
    def http_message(self) -> http.Message | None: ...


class ObsmaskContentview:
    """The view for mitmproxy 12's API (a ``Contentview``: a text). After
    ``done`` it stays registered (mitmproxy 12 has no way to remove a view)
    but is never chosen again, and says so if asked by name."""

    name = NAME
    syntax_highlight = "none"

    def __init__(self) -> None:
        self.loaded = True

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        if not self.loaded:
            return "obsmask: obsmask is no longer loaded"
        lines = safe_page(metadata.flow, metadata.http_message, data)[1]
        # mitmweb 12 draws nothing for an empty line either.
        return page_text(line if line.text else text(" ") for line in lines)

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        if not self.loaded:
            return -1.0
        return safe_priority(metadata.flow, metadata.http_message)

    def __lt__(self, other: object) -> bool:
        return NAME < str(getattr(other, "name", ""))


NEW_API = hasattr(contentviews, "Contentview")
# Typed for both majors (each one's signatures name its own view class).
_add = cast(Callable[[object], None], contentviews.add)
# mitmproxy 11's; mitmproxy 12 keeps them, deprecated, out of its exports.
_get = cast(Callable[[str], object], getattr(contentviews, "get"))  # noqa: B009
_remove = cast(Callable[[object], None], getattr(contentviews, "remove"))  # noqa: B009


class MaskingView:
    """The addon that adds the view when obsmask loads and removes it when
    obsmask is done (a reloaded script adds it again). It reads the masking
    settings and the MCP marker of the running obsmask addons."""

    def __init__(self) -> None:
        self.view: LegacyView | ObsmaskContentview | None = None

    def load(self, loader: Loader) -> None:
        self.done()
        if NEW_API:
            self.view = ObsmaskContentview()
        else:
            old = _get(NAME)
            if old is not None:  # left by an earlier load that never ended
                _remove(old)
            self.view = legacy_view()
        _add(self.view)

    def done(self) -> None:
        view, self.view = self.view, None
        if isinstance(view, ObsmaskContentview):
            view.loaded = False
        elif view is not None:
            try:
                _remove(view)
            except ValueError:  # already gone
                pass
