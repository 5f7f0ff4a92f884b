"""The mitmproxy addon that masks old tool results in LLM requests.

Three wire formats, each on its own route: OpenAI Chat Completions
(``.../chat/completions``), Anthropic Messages (``.../v1/messages``) and
OpenAI Responses (``.../v1/responses``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Optional

from mitmproxy import ctx, exceptions, http, optmanager
from mitmproxy.addonmanager import Loader

from obsmask_core.policy import (
    DEFAULT_PLACEHOLDER_TEMPLATE,
    MaskPolicy,
    PolicyError,
    check_policy_value,
    policy_from_values,
)
from obsmask_core.provider_usage import (
    ProviderUsage,
    SseUsageReader,
    usage_from_json,
    usage_from_sse,
)
from obsmask_core.request_body import BodyOutcome, mask_request_body
from obsmask_core.tokens import TokenCounter
from obsmask_core.toml_config import ConfigError, load_config
from obsmask_core.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat

logger = logging.getLogger(__name__)

# mitmproxy option -> key of [observation_masking.schema1]
POLICY_OPTIONS = {
    "obsmask_enabled": "enabled",
    "obsmask_window_turns": "window_turns",
    "obsmask_keep_errors": "keep_errors",
    "obsmask_keep_last_k_per_tool": "keep_last_k_per_tool",
    "obsmask_placeholder_template": "placeholder_template",
    "obsmask_batch_turns": "batch_turns",
    "obsmask_trigger_tokens": "trigger_tokens",
    "obsmask_min_chars": "min_chars",
    "obsmask_exclude_tools": "exclude_tools",
    "obsmask_min_free_percent": "min_free_percent",
    "obsmask_max_input_tokens": "max_input_tokens",
    "obsmask_clip_head_chars": "clip_head_chars",
    "obsmask_clip_tail_chars": "clip_tail_chars",
    "obsmask_preserve_patterns": "preserve_patterns",
}
PATTERN_SEPARATOR = "|"
# option -> (format, default route): a POST whose path matches the route is
# read as that format; the first match in this order wins.
ROUTE_OPTIONS: dict[str, tuple[WireFormat, str]] = {
    "obsmask_chat_route": (CHAT, r"/chat/completions$"),
    "obsmask_anthropic_route": (ANTHROPIC, r"/v1/messages$"),
    "obsmask_responses_route": (RESPONSES, r"/v1/responses$"),
}
_FORMAT_TITLES = {
    "chat": "OpenAI Chat Completions",
    "anthropic": "Anthropic Messages",
    "responses": "OpenAI Responses",
}
MARK = ":scissors:"
ENCODING_WAIT_FOR_REPLAYS = 60.0


def set_explicitly(name: str) -> bool:
    """Was option ``name`` given a value (``--set``, config.yaml, the UI)?

    mitmproxy keeps an option at ``unset`` until something sets it. Comparing
    with the default instead would let mitm.toml win over ``--set x=<default>``,
    and the precedence is defaults < mitm.toml < options.
    """
    option = ctx.options._options.get(name)
    return option is not None and option.value is not optmanager.unset


def check_pending_values(options: optmanager.OptManager, prefix: str) -> None:
    """Check the ``--set`` values waiting for our options, before mitmproxy does.

    mitmproxy converts ``--set name=value`` for a script's option only when the
    script registers it, and a conversion error there goes unreported: the
    proxy would run without obsmask after ``--set obsmask_window_turns=ten``.
    An error logged here stops mitmdump at start-up instead, with one line.
    """
    for name in list(options.deferred):
        if not name.startswith(prefix) or name not in options:
            continue
        raw = getattr(options.deferred[name], "val", None)
        if not isinstance(raw, list):
            continue
        try:
            options._parse_setval(options._options[name], raw)
        except exceptions.OptionsError as e:
            logger.error("obsmask: --set %s=%s: %s", name, ",".join(raw), e)
            del options.deferred[name]


def _policy_value(key: str, value: object) -> object:
    """An option's value in the form the TOML key takes (lists for the
    Sequence[str] options; BEGIN|END strings as [begin, end] pairs)."""
    if isinstance(value, (list, tuple)):
        if key == "preserve_patterns":
            return [str(pattern).split(PATTERN_SEPARATOR, 1) for pattern in value]
        return list(value)
    return value


class ConversationMasking:
    """Masks old tool results (Schéma 1) in OpenAI Chat Completions, Anthropic
    Messages and OpenAI Responses requests, each recognised by its route."""

    def __init__(self, tokens: TokenCounter | None = None) -> None:
        self.policy = MaskPolicy()
        self.config_path: str | None = None
        self.routes: list[tuple[re.Pattern[str], WireFormat]] = [
            (re.compile(default), fmt) for fmt, default in ROUTE_OPTIONS.values()
        ]
        self.tokens = tokens or TokenCounter()

    def load(self, loader: Loader) -> None:
        loader.add_option(
            "obsmask_config",
            Optional[str],  # noqa: UP045 - mitmproxy compares typespecs with typing.Optional
            None,
            """
            The TOML file with obsmask's settings ([observation_masking.schema1]).
            When unset, mitm.toml in the current directory is read if there is
            one, else the built-in defaults apply. A file named here must exist.
            Options set with --set win over the file.
            """,
        )
        loader.add_option(
            "obsmask_profile",
            str,
            "",
            """
            A profile of the settings file ([observation_masking.profiles.NAME])
            whose keys replace those of [observation_masking.schema1], e.g.
            no_cache for a provider without a prompt cache. Empty: none.
            """,
        )
        loader.add_option(
            "obsmask_enabled",
            bool,
            True,
            """
            Mask old tool results in requests on the obsmask_*_route routes.
            false forwards every body byte for byte (the instant rollback of
            the spec).
            """,
        )
        loader.add_option(
            "obsmask_window_turns",
            int,
            8,
            """
            How many of the most recent tool turns keep their results intact.
            A tool turn is one model turn that called tools: an assistant
            message with tool_calls or tool_use blocks, or a run of
            function_call items (several calls in one turn are one turn).
            Results of older turns are replaced by the placeholder. 0 masks
            nothing.
            """,
        )
        loader.add_option(
            "obsmask_keep_errors",
            bool,
            True,
            """
            Never mask a result that reads as an error: a Python traceback, a
            line starting with an exception name or "error:", a compiler error,
            a timeout or refused connection, JSON with a non-empty "error" or
            "status": "error".
            """,
        )
        loader.add_option(
            "obsmask_keep_last_k_per_tool",
            int,
            0,
            """
            Keep the K most recent results of each tool intact even outside the
            window (0: off).
            """,
        )
        loader.add_option(
            "obsmask_placeholder_template",
            str,
            DEFAULT_PLACEHOLDER_TEMPLATE,
            """
            Text that replaces a masked result. Fields: {tool_call_id},
            {tool_name} ("inconnu" when unknown), {original_chars}. A result
            is only masked when the placeholder is shorter than it.
            """,
        )
        defaults = MaskPolicy()
        for option, default, help_text in (
            ("obsmask_batch_turns", defaults.batch_turns, """
             Move the masking frontier in steps of this many tool turns, so the
             masked part of the history stays byte-identical between moves and
             the provider's prompt cache keeps serving it. 1 is the spec's
             sliding window."""),
            ("obsmask_trigger_tokens", defaults.trigger_tokens, """
             Mask nothing while the request's estimated input (characters / 4)
             is below this many tokens. 0: always."""),
            ("obsmask_min_chars", defaults.min_chars, """
             Never mask a result shorter than this many characters."""),
            ("obsmask_min_free_percent", defaults.min_free_percent, """
             Move the frontier only when the results it masks free at least
             this percentage of what the move makes the provider bill again
             (everything after the first newly masked result). 0: always."""),
            ("obsmask_max_input_tokens", defaults.max_input_tokens, """
             If a request is still estimated above this many tokens after
             masking, clip the results inside the window to head + marker +
             tail, oldest first. 0: off."""),
            ("obsmask_clip_head_chars", defaults.clip_head_chars, """
             Characters kept from the start of a clipped result."""),
            ("obsmask_clip_tail_chars", defaults.clip_tail_chars, """
             Characters kept from the end of a clipped result."""),
        ):
            loader.add_option(option, int, default, help_text)
        loader.add_option(
            "obsmask_exclude_tools",
            Sequence[str],
            list(defaults.exclude_tools),
            """
            Tools whose results are never masked or clipped (repeat the option
            for several).
            """,
        )
        loader.add_option(
            "obsmask_preserve_patterns",
            Sequence[str],
            [PATTERN_SEPARATOR.join(pair) for pair in defaults.preserve_patterns],
            """
            BEGIN|END marker pairs: a block from BEGIN to END inside a masked
            result survives masking, after the placeholder.
            """,
        )
        for option, (fmt, default) in ROUTE_OPTIONS.items():
            loader.add_option(
                option,
                str,
                default,
                f"""
                Regular expression searched in the path (without the query) of
                POST requests: the ones that match are read as {_FORMAT_TITLES[fmt.name]}
                requests. An empty value turns this format off.
                """,
            )
        loader.add_option(
            "obsmask_stream_responses",
            bool,
            True,
            """
            Pass text/event-stream answers to matching requests on as they
            arrive (mitmproxy otherwise holds a response until it is complete,
            which stalls a streaming client). Turn off to keep the whole answer
            in the flow, e.g. to read it in mitmweb.
            """,
        )
        check_pending_values(loader.master.options, "obsmask_")

    def configure(self, updated: set[str]) -> None:
        if updated & set(ROUTE_OPTIONS):
            routes = []
            for option, (fmt, _default) in ROUTE_OPTIONS.items():
                pattern = getattr(ctx.options, option)
                if not pattern:
                    continue
                try:
                    routes.append((re.compile(pattern), fmt))
                except re.error as e:
                    raise exceptions.OptionsError(
                        f"obsmask: {option}: not a regular expression ({e})"
                    ) from None
            self.routes = routes
        if not updated & (set(POLICY_OPTIONS) | {"obsmask_config", "obsmask_profile"}):
            return
        try:
            config = load_config(ctx.options.obsmask_config)
            values = config.values(ctx.options.obsmask_profile)
        except ConfigError as e:
            raise exceptions.OptionsError(f"obsmask: {e}") from None
        for option, key in POLICY_OPTIONS.items():
            if not set_explicitly(option):
                continue
            value = _policy_value(key, getattr(ctx.options, option))
            try:
                check_policy_value(key, value)
            except PolicyError as e:
                raise exceptions.OptionsError(f"obsmask: {option}: {e.message}") from None
            values[key] = value
        policy = policy_from_values(values)
        if policy != self.policy or config.path != self.config_path:
            self.policy, self.config_path = policy, config.path
            logger.info("obsmask: %s", self._describe())

    def _describe(self) -> str:
        p = self.policy
        source = self.config_path or "built-in defaults"
        if ctx.options.obsmask_profile:
            source += f", profile {ctx.options.obsmask_profile}"
        if not p.enabled:
            return f"conversation masking off (settings: {source})"
        extras = [
            f"{name}={value}"
            for name, value, neutral in (
                ("batch_turns", p.batch_turns, 1),
                ("trigger_tokens", p.trigger_tokens, 0),
                ("min_chars", p.min_chars, 0),
                ("min_free_percent", p.min_free_percent, 0),
                ("max_input_tokens", p.max_input_tokens, 0),
                ("exclude_tools", ",".join(p.exclude_tools), ""),
            )
            if value != neutral
        ]
        return (
            f"conversation masking on: window {p.window_turns} tool turns, "
            f"keep_errors={'on' if p.keep_errors else 'off'}, "
            f"keep_last_k_per_tool={p.per_tool_keep}"
            + "".join(", " + extra for extra in extras)
            + f" (settings: {source}, then options)"
        )

    def running(self) -> None:
        self.tokens.start_loading()

    def _format_of(self, flow: http.HTTPFlow) -> WireFormat | None:
        if flow.request.method != "POST":
            return None
        path = flow.request.path.split("?", 1)[0]
        for route, fmt in self.routes:
            if route.search(path):
                return fmt
        return None

    def request(self, flow: http.HTTPFlow) -> None:
        fmt = self._format_of(flow)
        if fmt is None:
            return
        try:
            self._mask(flow, fmt)
        except Exception as e:  # noqa: BLE001 - never let a bug break the user's traffic
            logger.error(
                "obsmask: internal error, %s forwarded unchanged: %s: %s",
                where(flow),
                type(e).__name__,
                e,
            )

    def _mask(self, flow: http.HTTPFlow, fmt: WireFormat) -> None:
        if flow.request.raw_content is None:
            _pass(flow, "the body is streamed (stream_large_bodies), not buffered", fmt)
            return
        try:
            body = flow.request.get_content()
        except ValueError as e:
            encoding = flow.request.headers.get("content-encoding", "")
            _pass(flow, f"cannot decode content-encoding {encoding!r} ({e})", fmt)
            return
        if body is None:
            return
        outcome = mask_request_body(body, self.policy, fmt)
        if outcome.body is None:
            _report_unchanged(flow, outcome, fmt)
            return
        self._apply(flow, outcome, fmt)

    def _apply(self, flow: http.HTTPFlow, outcome: BodyOutcome, fmt: WireFormat) -> None:
        assert outcome.body is not None and outcome.plan is not None
        decisions = outcome.plan.decisions
        if not flow.live:
            # A flow read from a file (mitmdump -nr): nobody waits on it, so
            # wait for the encoding rather than record no token counts.
            self.tokens.wait_until_loaded(ENCODING_WAIT_FOR_REPLAYS)
        tokens_before = self.tokens.count_all(d.original for d in decisions)
        tokens_after = self.tokens.count_all(d.new_text for d in decisions)
        encoding = self.tokens.encoding_name or (
            "unavailable" if self.tokens.failure else "loading"
        )
        summary = {
            "action": "masked",
            "format": fmt.name,
            "masked_tool_results": outcome.plan.masked,
            "clipped_tool_results": outcome.plan.clipped,
            "stage": outcome.plan.stage,
            "frontier_turn": outcome.plan.frontier_turn,
            "tool_results": outcome.plan.tool_results,
            "tool_turns": outcome.plan.tool_turns,
            "kept": dict(sorted(outcome.plan.kept.items())),
            "tool_chars_before": outcome.tool_chars_before,
            "tool_chars_after": outcome.tool_chars_after,
            "masked_tokens_before": tokens_before,
            "masked_tokens_after": tokens_after,
            "token_encoding": encoding,
            "body_bytes_before": len(flow.request.raw_content or b""),
            "window_turns": self.policy.window_turns,
        }
        # Encode (compress again, if the client did) on a copy: if that fails,
        # the flow has not been touched.
        masked = flow.request.copy()
        masked.content = outcome.body
        flow.backup()
        flow.request.raw_content = masked.raw_content
        flow.request.headers = masked.headers
        summary["body_bytes_after"] = len(masked.raw_content or b"")
        flow.metadata["obsmask"] = summary
        line = _summary_line(summary)
        comment = f"obsmask: {line}"
        flow.comment = f"{flow.comment}\n{comment}" if flow.comment else comment
        flow.marked = MARK
        logger.info("obsmask: %s: %s", where(flow), line)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if (
            ctx.options.obsmask_stream_responses
            and flow.response is not None
            and not flow.response.stream
            and self._format_of(flow) is not None
            and flow.response.headers.get("content-type", "").startswith("text/event-stream")
        ):
            # Streamed through as it comes; the tap only reads the provider's
            # usage report (its last events) on the way.
            flow.response.stream = _UsageTap(
                flow, SseUsageReader(flow.response.headers.get("content-encoding"))
            )

    def response(self, flow: http.HTTPFlow) -> None:
        """Record the usage the provider reported for a buffered answer."""
        if flow.response is None or flow.response.stream or self._format_of(flow) is None:
            return
        try:
            content = flow.response.get_content(strict=False) or b""
            if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
                usage = usage_from_sse(content)
            else:
                usage = usage_from_json(content)
            _record_usage(flow, usage)
        except Exception as e:  # noqa: BLE001 - reading usage must never break the answer
            logger.error("obsmask: cannot read the usage of %s: %s: %s", where(flow),
                         type(e).__name__, e)


class _UsageTap:
    """mitmproxy's stream callable: every chunk goes on unchanged (an empty
    one only at the end, since an empty chunk ends a chunked body), and the
    reader sees it too."""

    def __init__(self, flow: http.HTTPFlow, reader: SseUsageReader) -> None:
        self.flow = flow
        self.reader = reader

    def __call__(self, chunk: bytes) -> bytes:
        try:
            if chunk:
                self.reader.feed(chunk)
            else:
                self.reader.finish()
                _record_usage(self.flow, self.reader.usage, self.reader.problem)
        except Exception as e:  # noqa: BLE001 - the stream must go on whatever happens
            logger.error("obsmask: cannot read the usage of %s: %s: %s", where(self.flow),
                         type(e).__name__, e)
        return chunk


def _record_usage(
    flow: http.HTTPFlow, usage: ProviderUsage | None, problem: str | None = None
) -> None:
    """Put the provider's reported usage next to obsmask's own figures: the
    cached input tokens are how a user checks what masking did to the cache."""
    summary = flow.metadata.setdefault("obsmask", {})
    if usage is None:
        if problem:
            summary["provider_usage_problem"] = problem
        return
    summary["provider_usage"] = usage.as_metadata()
    line = (
        f"obsmask: provider reported {_count(usage.input_tokens)} input tokens, "
        f"{_count(usage.cached_input_tokens)} read from its cache"
        + (
            f", {_count(usage.cache_creation_input_tokens)} written to it"
            if usage.cache_creation_input_tokens is not None
            else ""
        )
    )
    flow.comment = f"{flow.comment}\n{line}" if flow.comment else line
    logger.info("%s (%s)", line, where(flow))


def _count(value: int | None) -> str:
    return f"{value:,}" if value is not None else "n/a"


def where(flow: http.HTTPFlow) -> str:
    # The path without its query: some clients put keys in the query string.
    return f"{flow.request.method} {flow.request.path.split('?', 1)[0]}"


def _pass(flow: http.HTTPFlow, reason: str, fmt: WireFormat) -> None:
    flow.metadata["obsmask"] = {"action": "passed_through", "format": fmt.name, "reason": reason}
    logger.warning(
        "obsmask: %s forwarded unchanged (read as %s): %s",
        where(flow),
        _FORMAT_TITLES[fmt.name],
        reason,
    )


def _report_unchanged(flow: http.HTTPFlow, outcome: BodyOutcome, fmt: WireFormat) -> None:
    if outcome.violation is not None:
        flow.metadata["obsmask"] = {
            "action": "passed_through",
            "format": fmt.name,
            "reason": outcome.violation,
        }
        logger.error(
            "obsmask: %s forwarded unchanged: the masked body broke an invariant (%s)",
            where(flow),
            outcome.violation,
        )
    elif outcome.plan is None and outcome.reason != "masking is disabled":
        _pass(flow, outcome.reason, fmt)
    else:
        flow.metadata["obsmask"] = {
            "action": "unchanged",
            "format": fmt.name,
            "reason": outcome.reason,
        }
        logger.debug("obsmask: %s unchanged: %s", where(flow), outcome.reason)


def _summary_line(summary: dict[str, object]) -> str:
    def number(key: str) -> str:
        value = summary[key]
        return f"{value:,}" if isinstance(value, int) else "n/a"

    clipped = summary.get("clipped_tool_results")
    return (
        f"masked {summary['masked_tool_results']} of {summary['tool_results']} "
        + (f"and clipped {clipped} " if clipped else "")
        + f"tool results: tool chars {number('tool_chars_before')} -> "
        f"{number('tool_chars_after')}, tokens of the masked results "
        f"{number('masked_tokens_before')} -> {number('masked_tokens_after')} "
        f"({summary['token_encoding']})"
    )
