"""The mitmproxy addon that masks old tool results in LLM requests.

Three wire formats, each on its own route: OpenAI Chat Completions
(``.../chat/completions``), Anthropic Messages (``.../v1/messages``) and
OpenAI Responses (``.../v1/responses``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from mitmproxy import ctx, http
from mitmproxy.addonmanager import Loader

from obsmask_core.conversation.billing.last_seen import LastSeen, Visit
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import (
    Masked,
    Refused,
    Unchanged,
    Unreadable,
)
from obsmask_core.conversation.masking.summary import LeftAlone, MaskSummary, describe_policy
from obsmask_core.conversation.settings.policy import POLICY_SECTION, MaskPolicy, policy_values
from obsmask_core.conversation.settings.routes import FORMAT_TITLES, Routes
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.conversation.view.unmasked import UnmaskedReasons
from obsmask_core.mitm.body_encoding import EncodedBody, encoded
from obsmask_core.mitm.flows import (
    CONVERSATION_METADATA,
    MARK,
    add_comment,
    guarded,
    log_once_sent,
    where,
)
from obsmask_core.mitm.off_loop import OffLoop, freeze_startup_objects
from obsmask_core.mitm.options import add_options, option_values, settings_in_force
from obsmask_core.mitm.recall_addon import Recall
from obsmask_core.mitm.rewrite_work import Rewrite, Rewritten
from obsmask_core.mitm.settings_addon import FILE_OPTIONS, SettingsFile
from obsmask_core.mitm.unknown_models import UnknownModels
from obsmask_core.mitm.usage_tap import (
    UsageTap,
    is_event_stream,
    record_buffered_usage,
    stream_with_usage,
)
from obsmask_core.shared.settings import build
from obsmask_core.shared.tokens import TokenCounter

logger = logging.getLogger(__name__)


PREFIX = "obsmask_"
REFUSED_UPGRADE = (b"obsmask: send this request over HTTP: obsmask masks HTTP requests, not "
                   b"WebSocket messages (refuse_websockets)\n")
# A flow read from a file (mitmdump -nr) waits this long for the encoding,
# so that a replay records token counts.
ENCODING_WAIT_FOR_REPLAYS = 60.0


def _handled_when_recorded(flow: http.HTTPFlow) -> bool:
    """A flow read from a file (``mitmdump -nr``) that obsmask handled when
    it was recorded keeps that record: its body is the one that went out
    (the client's is its backup), and masking it again would report a
    second rewrite that never reached the provider."""
    return not flow.live and CONVERSATION_METADATA in flow.metadata


class ConversationMasking:
    """Masks old tool results in OpenAI Chat Completions, Anthropic Messages
    and OpenAI Responses requests, each recognised by its route."""

    def __init__(self, settings: SettingsFile, tokens: TokenCounter | None = None,
                 recall: Recall | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.recall = recall
        # The policy in force and what masking keeps under it.
        self.masker = Masker(MaskPolicy())
        self.routes = Routes()
        self.config_path: str | None = None
        self._described = False
        self.tokens = tokens or TokenCounter()
        self._options: set[str] = set(FILE_OPTIONS)
        # When each conversation was last seen (cold_after_seconds), and the
        # clock of live requests.
        self.last_seen = LastSeen()
        self._clock = clock
        # The worker thread for big bodies, shared with the MCP addon.
        self.off_loop = OffLoop()
        self.unknown_models = UnknownModels()
        self.unmasked = UnmaskedReasons()
        # Told of each streamed answer once its usage report has been read,
        # before that chunk goes on to the client (the provider's brake).
        self.usage_read: list[Callable[[http.HTTPFlow], None]] = []

    def load(self, loader: Loader) -> None:
        self._options.update(add_options(loader, MaskPolicy, PREFIX))
        self._options.update(add_options(loader, Routes, PREFIX))

    def configure(self, updated: set[str]) -> None:
        if not updated & self._options:
            return
        self.routes = build(Routes, option_values(Routes, PREFIX, only_set=False))
        config = self.settings.current()
        profile = ctx.options.obsmask_profile
        policy = settings_in_force(MaskPolicy, PREFIX, config, POLICY_SECTION,
                                   lambda: policy_values(config, profile))
        policy, source = self.settings.switched(policy, PREFIX, config, POLICY_SECTION,
                                                profile=profile)
        # The start-up line, and again whenever the policy or its file
        # changes (the built-in defaults with no file get one too).
        if policy != self.policy or config.path != self.config_path or not self._described:
            if policy != self.policy:
                self.masker = Masker(policy)
            self.config_path, self._described = config.path, True
            logger.info("obsmask: %s", describe_policy(policy, source))

    @property
    def policy(self) -> MaskPolicy:
        return self.masker.policy

    def running(self) -> None:
        self.tokens.start_loading()
        freeze_startup_objects()

    def _format_of(self, flow: http.HTTPFlow) -> WireFormat | None:
        request = flow.request
        # mitmproxy parses the host anew each time: only when a filter asks.
        return self.routes.format_of(request.method, request.path,
                                     request.pretty_host if self.routes.hosts else None)

    def request(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        if self._refused_upgrade(flow):
            return None
        if (fmt := self._format_of(flow)) is None or _handled_when_recorded(flow):
            return None
        with guarded(flow, "forwarded unchanged"):
            # The settings as they are now: a worker must not see a policy
            # that changes halfway through.
            work = Rewrite(flow.request, fmt, self.masker,
                           self.recall is not None and self.recall.enabled,
                           exact_tokens=not flow.live, visit=self.visit(flow))
            if self.off_loop.takes(flow.request):
                return self._rewrite_off_loop(flow, work)
            # The collector waits, as on the worker (see without_collector).
            self._report(flow, fmt, self.off_loop.without_collector(lambda: self._rewrite(work)))
        return None

    def _refused_upgrade(self, flow: http.HTTPFlow) -> bool:
        """A WebSocket upgrade on the Responses route, answered with 426
        (``refuse_websockets``): the client falls back to HTTP POSTs."""
        request = flow.request
        if not self.routes.refuses_upgrade(request.method, request.path,
                                           request.headers.get("upgrade", ""),
                                           request.pretty_host if self.routes.hosts else None):
            return False
        flow.response = http.Response.make(426, REFUSED_UPGRADE, {"content-type": "text/plain"})
        logger.info("obsmask: %s: WebSocket upgrade answered 426, for the client to send its "
                    "requests as HTTP (refuse_websockets)", where(flow))
        return True

    def visit(self, flow: http.HTTPFlow) -> Visit:
        """The flow's table of when conversations were last seen, and its
        time, read as it comes (a worker may plan it later): a flow read
        from a file keeps the time it was recorded at, so a replay sees the
        pauses of the session. The provider brake weighs the answer in the
        same table."""
        now = self._clock() if flow.live else flow.request.timestamp_start
        # Live requests visit the table the proxies share when recall's
        # store is a Redis server ([recall] share_last_seen); a replay only
        # this process's own.
        shared = self.recall.shared_last_seen if self.recall is not None else None
        return Visit(shared if shared is not None and flow.live else self.last_seen, now)

    async def _rewrite_off_loop(self, flow: http.HTTPFlow, work: Rewrite) -> None:
        """A big body: decoded, masked and encoded again on a worker thread,
        while every other flow moves; the flow is changed back on the loop."""
        with guarded(flow, "forwarded unchanged"):
            rewritten = await self.off_loop.run(lambda: self._rewrite(work))
            self._report(flow, work.fmt, rewritten)

    def _rewrite(self, work: Rewrite) -> Rewritten | str:
        """The request's new raw body and headers, and what was done; or why
        it passes through. Reads the request, never changes it: this may run
        on a worker thread."""
        request, fmt, policy = work.request, work.fmt, work.masker.policy
        try:
            body = request.get_content()
        except ValueError as e:
            encoding = request.headers.get("content-encoding", "")
            # The decoder's type only: mitmproxy's message quotes the body.
            error = type(e.__context__ or e).__name__
            return f"cannot decode content-encoding {encoding!r} ({error})"
        if body is None or request.raw_content is None:
            return "the body is streamed (stream_large_bodies), not buffered"
        started = time.perf_counter()
        outcome = work.masker.mask(body, fmt, recall=work.recall, visit=work.visit)
        mask_ms = round((time.perf_counter() - started) * 1000, 3)
        if not isinstance(outcome, Masked):
            return Rewritten(outcome, mask_ms)
        # Encode (compress again, if the client did) apart from the flow:
        # if that fails, the flow has not been touched.
        masked = encoded(request, outcome.body)
        if work.exact_tokens:
            # A flow read from a file (mitmdump -nr): nobody waits on it, so
            # wait for the encoding rather than record no token counts.
            self.tokens.wait_until_loaded(ENCODING_WAIT_FOR_REPLAYS)
        summary = MaskSummary.of(outcome, fmt.name, self.tokens, policy,
                                 len(request.raw_content), len(masked.raw),
                                 mask_ms, exact_tokens=work.exact_tokens)
        return Rewritten(outcome, mask_ms, masked, summary)

    def _report(self, flow: http.HTTPFlow, fmt: WireFormat, rewritten: Rewritten | str) -> None:
        if isinstance(rewritten, str):
            self._pass(flow, fmt, rewritten)
            return
        if (plan := rewritten.outcome.plan) is not None and plan.bill is not None:
            self.unknown_models.tell(plan.bill.price_row)
        match rewritten.outcome:
            case Masked():
                assert rewritten.body is not None and rewritten.summary is not None
                self._apply(flow, rewritten.body, rewritten.summary)
            case Unreadable(reason=reason):
                self._pass(flow, fmt, reason)
            case Refused(violation=violation):
                flow.metadata[CONVERSATION_METADATA] = LeftAlone(
                    "passed_through", fmt.name, violation).as_metadata()
                logger.error("obsmask: %s forwarded unchanged: the masked body broke an "
                             "invariant (%s)", where(flow), violation)
            case Unchanged(reason=reason, plan=plan):
                # Said once per conversation and kind of reason (else in debug).
                why, news = self.unmasked.of(plan, self.policy.window_turns)
                flow.metadata[CONVERSATION_METADATA] = LeftAlone.unchanged(
                    fmt.name, reason, plan, rewritten.mask_ms, why).as_metadata()
                if news:
                    log_once_sent(flow, logger, "obsmask: %s left unmasked: %s", where(flow), why)
                else:
                    logger.debug("obsmask: %s unchanged: %s", where(flow), why or reason)
                if plan is not None and plan.refetches.new_calls:
                    # A re-fetch is news even when nothing else was done.
                    line = (f"re-fetch of a masked result: {', '.join(plan.refetches.new_calls)}"
                            f"; unchanged: {reason}")
                    add_comment(flow, f"obsmask: {line}")
                    log_once_sent(flow, logger, "obsmask: %s: %s", where(flow), line)

    @staticmethod
    def _apply(flow: http.HTTPFlow, masked: EncodedBody, summary: MaskSummary) -> None:
        flow.backup()
        masked.apply_to(flow.request)
        flow.metadata[CONVERSATION_METADATA] = summary.as_metadata()
        line = summary.comment_line()
        add_comment(flow, f"obsmask: {line}")
        flow.marked = MARK
        log_once_sent(flow, logger, "obsmask: %s: %s", where(flow), line)

    @staticmethod
    def _pass(flow: http.HTTPFlow, fmt: WireFormat, reason: str) -> None:
        flow.metadata[CONVERSATION_METADATA] = LeftAlone(
            "passed_through", fmt.name, reason).as_metadata()
        logger.warning("obsmask: %s forwarded unchanged (read as %s): %s",
                       where(flow), FORMAT_TITLES[fmt.name], reason)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        response = flow.response
        if (
            response is None
            or response.stream
            or not self.routes.stream_responses
            or not is_event_stream(response)
            or self._format_of(flow) is None
        ):
            return
        stream_with_usage(response, flow, self._usage_read if self.usage_read else None)

    def _usage_read(self, flow: http.HTTPFlow) -> None:
        for listener in self.usage_read:
            listener(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        """A streamed answer that never ended: say whether its usage was read."""
        if flow.response is None or not isinstance(tap := flow.response.stream, UsageTap):
            return
        with guarded(flow, "ended (its usage not recorded)"):
            tap.cut_short(flow.error.msg if flow.error else "no error message")

    def response(self, flow: http.HTTPFlow) -> None:
        """Record the usage the provider reported for a buffered answer."""
        if flow.response is None or flow.response.stream or self._format_of(flow) is None:
            return
        with guarded(flow, "answered unchanged, its usage not read"):
            record_buffered_usage(flow, flow.response)
