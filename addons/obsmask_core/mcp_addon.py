"""The mitmproxy addon that cuts long strings in MCP responses, and the gateway.

MCP traffic is JSON-RPC 2.0 over HTTP: a POST whose body is a JSON-RPC
message, answered with ``application/json`` or ``text/event-stream``, and
GET streams (Streamable HTTP, and the legacy HTTP+SSE transport) whose
events carry messages. Only JSON-RPC responses are ever changed; a body or
event that is not one goes on byte for byte.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from mitmproxy import ctx, exceptions, http
from mitmproxy.addonmanager import Loader

from obsmask_core.conversation_addon import MARK, check_pending_values, set_explicitly, where
from obsmask_core.gateway import (
    DEFAULT_TIMEOUT_SECONDS,
    ERROR_HEADER,
    ERROR_HTTP_STATUS,
    RELAY_HEADER,
    UNKNOWN_SERVER,
    GatewayFailure,
    GatewayRelay,
    Upstream,
    error_body,
    gateway_server_name,
    parse_upstream,
    request_id_text,
)
from obsmask_core.jsonrpc_truncation import (
    TextTruncation,
    TruncationLimits,
    TruncationMarker,
    check_truncation_value,
    limits_from_values,
    scan_jsonrpc,
    truncate_jsonrpc_body,
)
from obsmask_core.policy import PolicyError
from obsmask_core.sse_truncation import SseTruncator, can_rewrite, truncate_sse_body
from obsmask_core.tokens import TokenCounter
from obsmask_core.toml_config import ConfigError, load_config
from obsmask_core.truncation import DEFAULT_MARKER_TEMPLATE

logger = logging.getLogger(__name__)

# mitmproxy option -> key of [mcp_gateway.masking]
MASKING_OPTIONS = {
    "mcpmask_enabled": "enabled",
    "mcpmask_max_chars": "max_chars",
    "mcpmask_head_chars": "head_chars",
    "mcpmask_tail_chars": "tail_chars",
    "mcpmask_marker_template": "marker_template",
}
GATEWAY_OPTIONS = {"mcpmask_gateway_servers", "mcpmask_gateway_timeout"}
METADATA_KEY = "obsmask_mcp"
# Sent by Streamable HTTP clients after initialisation (MCP 2025-03-26 and later).
MCP_REQUEST_HEADERS = ("mcp-session-id", "mcp-protocol-version")
EVENT_STREAM = "text/event-stream"
# Tokens saved are counted on the text that was cut away, up to this many
# characters per answer (or event); beyond, counting would hold the proxy up.
MAX_COUNTED_CHARS = 1_000_000


def _is_event_stream(message: http.Message) -> bool:
    return message.headers.get("content-type", "").lower().startswith(EVENT_STREAM)


def _looks_like_jsonrpc(body: bytes) -> bool:
    """Cheap test before a real scan: JSON that names "jsonrpc"."""
    start = body[:64].lstrip()
    return start[:1] in (b"{", b"[") and b'"jsonrpc"' in body


class McpTruncation:
    """Cuts long strings in JSON-RPC responses to head + marker + tail
    (seed 004), on every MCP transport, and serves the gateway routes."""

    def __init__(self, tokens: TokenCounter | None = None) -> None:
        self.enabled = True
        self.limits = TruncationLimits()
        self.marker = TruncationMarker(self.limits.marker_template)
        self.servers: dict[str, Upstream] = {}
        self.timeout = float(DEFAULT_TIMEOUT_SECONDS)
        self.tokens = tokens or TokenCounter()
        self.relay = GatewayRelay(lambda: self.servers, lambda: self.timeout)

    def load(self, loader: Loader) -> None:
        loader.add_option(
            "mcpmask_enabled",
            bool,
            True,
            """
            Cut long strings in MCP (JSON-RPC 2.0) responses. false forwards
            every MCP answer byte for byte; the gateway routes keep working.
            """,
        )
        limits = TruncationLimits()
        for option, default, help_text in (
            ("mcpmask_max_chars", limits.max_chars, """
             A string longer than this many characters inside a JSON-RPC
             response's result or error.data is cut to head + marker + tail
             (when that makes it shorter)."""),
            ("mcpmask_head_chars", limits.head_chars, """
             Characters kept from the start of a cut string."""),
            ("mcpmask_tail_chars", limits.tail_chars, """
             Characters kept from the end of a cut string. head + tail must not
             exceed mcpmask_max_chars."""),
        ):
            loader.add_option(option, int, default, help_text)
        loader.add_option(
            "mcpmask_marker_template",
            str,
            DEFAULT_MARKER_TEMPLATE,
            """
            The text put between head and tail. Fields: {original_chars},
            {head}, {tail}. A string that already holds a marker of this
            template is never cut again.
            """,
        )
        loader.add_option(
            "mcpmask_gateway_servers",
            Sequence[str],
            [],
            """
            Gateway servers as NAME=URL (repeat the option for several), added
            to [mcp_gateway.servers] of the settings file: a request to
            /api/mcp-gateway/NAME/rpc on the proxy goes to URL.
            """,
        )
        loader.add_option(
            "mcpmask_gateway_timeout",
            int,
            DEFAULT_TIMEOUT_SECONDS,
            """
            Seconds the gateway waits for a server to accept a connection, to
            take the request, to begin its answer, and for each next bytes of
            an answer that is not an event stream, before it answers the
            client with a JSON-RPC timeout error (-32053).
            """,
        )
        check_pending_values(loader.master.options, "mcpmask_")

    def configure(self, updated: set[str]) -> None:
        if not updated & (set(MASKING_OPTIONS) | GATEWAY_OPTIONS | {"obsmask_config"}):
            return
        try:
            config = load_config(ctx.options.obsmask_config)
        except ConfigError as e:
            raise exceptions.OptionsError(f"obsmask: {e}") from None
        source = config.path or "built-in defaults"
        values = dict(config.mcp_masking)
        for option, key in MASKING_OPTIONS.items():
            if set_explicitly(option):
                value = getattr(ctx.options, option)
                try:
                    check_truncation_value(key, value)
                except PolicyError as e:
                    raise exceptions.OptionsError(f"obsmask: {option}: {e.message}") from None
                values[key] = value
        enabled = values.get("enabled", True) is True
        try:
            limits = limits_from_values(values)
        except PolicyError as e:
            raise exceptions.OptionsError(
                f"obsmask: [mcp_gateway.masking] ({source}, then mcpmask_* options): "
                f"{e.message}"
            ) from None
        servers = {
            name: parse_upstream(name, url) for name, url in config.mcp_servers.items()
        }
        for entry in ctx.options.mcpmask_gateway_servers:
            name, sep, url = entry.partition("=")
            if not sep:
                raise exceptions.OptionsError(
                    f"obsmask: mcpmask_gateway_servers: {entry!r} is not NAME=URL"
                )
            try:
                servers[name.strip()] = parse_upstream(name.strip(), url.strip())
            except PolicyError as e:
                raise exceptions.OptionsError(
                    f"obsmask: mcpmask_gateway_servers: {e}"
                ) from None
        timeout = config.mcp_gateway.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
        if set_explicitly("mcpmask_gateway_timeout"):
            timeout = ctx.options.mcpmask_gateway_timeout
            if timeout < 1:
                raise exceptions.OptionsError(
                    "obsmask: mcpmask_gateway_timeout: must be at least 1 second"
                )
        assert isinstance(timeout, int)
        self.enabled, self.limits, self.servers = enabled, limits, servers
        self.marker = TruncationMarker(limits.marker_template)
        self.timeout = float(timeout)
        logger.info("obsmask: %s", self._describe(source))

    def _describe(self, source: str) -> str:
        gateway = (
            f"; gateway routes /api/mcp-gateway/NAME/rpc for {', '.join(sorted(self.servers))} "
            f"(timeout {self.timeout:g} s)"
            if self.servers
            else ""
        )
        if not self.enabled:
            return f"MCP truncation off (settings: {source}){gateway}"
        limits = self.limits
        return (
            f"MCP truncation on: strings over {limits.max_chars:,} chars in JSON-RPC "
            f"responses become {limits.head_chars:,} + marker + {limits.tail_chars:,} "
            f"(settings: {source}, then options){gateway}"
        )

    def running(self) -> None:
        self.tokens.start_loading()

    def done(self) -> None:
        self.relay.close()

    # --- requests: recognise MCP flows, serve the gateway routes ---

    async def request(self, flow: http.HTTPFlow) -> None:
        try:
            name = gateway_server_name(flow.request.path)
            # A flow read from a file (mitmdump -nr) already has its answer:
            # sending it again would run the tool call again.
            if name is not None and flow.response is None:
                await self._gateway(flow, name)
                return
            if flow.request.method == "POST":
                self._note_jsonrpc_request(flow)
        except Exception as e:  # noqa: BLE001 - never let a bug break the user's traffic
            logger.error("obsmask: internal error on %s: %s: %s", where(flow),
                         type(e).__name__, e)

    def _note_jsonrpc_request(self, flow: http.HTTPFlow) -> None:
        body = flow.request.get_content(strict=False) or b""
        if not _looks_like_jsonrpc(body):
            return
        try:
            scan = scan_jsonrpc(body.decode("utf-8"))
        except UnicodeDecodeError:
            return
        if scan.problem is None:
            flow.metadata[METADATA_KEY] = {"request": sorted(scan.kinds())}

    async def _gateway(self, flow: http.HTTPFlow, name: str) -> None:
        summary: dict[str, object] = {"gateway_server": name}
        flow.metadata[METADATA_KEY] = summary
        upstream = self.servers.get(name)
        if upstream is None:
            body = flow.request.get_content(strict=False) or b""
            id_text = request_id_text(body) if flow.request.method == "POST" else None
            known = ", ".join(sorted(self.servers)) or "none configured"
            self._gateway_error(flow, id_text, GatewayFailure(
                UNKNOWN_SERVER,
                f"no MCP server named {name!r} in [mcp_gateway.servers] (known: {known})",
            ), name)
            return
        summary["gateway_upstream"] = upstream.url
        # mitmproxy forwards the flow to the relay, which talks to the server
        # (see GatewayRelay for why); the answer comes back as any other.
        port = await self.relay.ensure_started()
        flow.request.headers[RELAY_HEADER] = name
        flow.request.scheme = "http"
        flow.request.host = "127.0.0.1"
        flow.request.port = port
        logger.info("obsmask: gateway %s %s -> %s", flow.request.method, name, upstream.url)

    def _relay_failure(self, flow: http.HTTPFlow, response: http.Response) -> None:
        """The relay answered with an error of its own: say so, like the
        gateway's other errors, and keep the internal header from the client."""
        summary = flow.metadata.get(METADATA_KEY, {})
        if summary.get("gateway_server") is None:
            return  # not from our relay: some server's header, left alone
        code = response.headers.pop(ERROR_HEADER)
        summary["gateway_error"] = int(code) if code.lstrip("-").isdigit() else code
        try:
            message = str(json.loads(response.content or b"{}")["error"]["message"])
        except (ValueError, KeyError, TypeError):
            message = f"obsmask gateway: error {code}"
        flow.comment = f"{flow.comment}\n{message}" if flow.comment else message
        logger.warning("obsmask: %s: %s (JSON-RPC error %s)", where(flow), message, code)

    def _gateway_error(
        self, flow: http.HTTPFlow, id_text: str | None, failure: GatewayFailure, name: str
    ) -> None:
        message = f"obsmask gateway: {failure.message}"
        status = 200 if id_text is not None else ERROR_HTTP_STATUS[failure.code]
        flow.response = http.Response.make(
            status,
            error_body(id_text, failure.code, message, {"server": name}),
            {"content-type": "application/json"},
        )
        summary = flow.metadata.setdefault(METADATA_KEY, {})
        summary["gateway_error"] = failure.code
        flow.comment = f"{flow.comment}\n{message}" if flow.comment else message
        logger.warning("obsmask: %s: %s (JSON-RPC error %d)", where(flow), message,
                       failure.code)

    # --- responses: cut long strings ---

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        response = flow.response
        if (
            response is None
            or response.stream
            # A whole body already (the gateway's own answers): the response
            # hook cuts it; a stream callable would never see it.
            or response.raw_content is not None
            or not _is_event_stream(response)
            or not self._may_be_mcp(flow)
        ):
            return
        if not self.enabled:
            # Unchanged, but still streamed: held whole by mitmproxy, a GET
            # stream would never reach the client at all.
            response.stream = True
            return
        try:
            encoding = response.headers.get("content-encoding")
            if encoding and not self._known_mcp(flow):
                # A compressed GET stream of some site: decoding it to look
                # for JSON-RPC would change its headers for nothing.
                return
            if not can_rewrite(encoding):
                response.stream = True
                logger.warning(
                    "obsmask: %s streamed unchanged: cannot decode content-encoding %r "
                    "on the fly", where(flow), encoding)
                return
            truncator = SseTruncator(self.limits, encoding, self.marker)
            # Cut events make the body shorter than any announced length (the
            # client would wait for the rest); a compressed stream goes out
            # decoded. Without a length, mitmproxy ends the body by closing.
            response.headers.pop("content-length", None)
            if encoding:
                del response.headers["content-encoding"]
            response.stream = _SseTap(self, flow, truncator)
        except Exception as e:  # noqa: BLE001
            logger.error("obsmask: internal error on %s: %s: %s", where(flow),
                         type(e).__name__, e)

    def _may_be_mcp(self, flow: http.HTTPFlow) -> bool:
        """A JSON-RPC request, or a GET stream (where MCP servers send their
        own messages, and the legacy transport sends every result). In a
        stream only JSON-RPC responses are ever changed."""
        return METADATA_KEY in flow.metadata or flow.request.method == "GET"

    @staticmethod
    def _known_mcp(flow: http.HTTPFlow) -> bool:
        """MCP for sure: a JSON-RPC request, a gateway flow, or a request
        with the headers of the Streamable HTTP transport."""
        return METADATA_KEY in flow.metadata or any(
            name in flow.request.headers for name in MCP_REQUEST_HEADERS)

    def response(self, flow: http.HTTPFlow) -> None:
        response = flow.response
        if response is None:
            return
        try:
            # The relay's error answers are small JSON bodies, never streamed:
            # their headers go to the client after this hook.
            if ERROR_HEADER in response.headers:
                self._relay_failure(flow, response)
            if not response.stream and self.enabled:
                self._truncate_buffered(flow, response)
        except Exception as e:  # noqa: BLE001 - never let a bug break the user's traffic
            logger.error("obsmask: internal error, %s answered unchanged: %s: %s",
                         where(flow), type(e).__name__, e)

    def _truncate_buffered(self, flow: http.HTTPFlow, response: http.Response) -> None:
        if response.raw_content is None or not response.raw_content:
            return
        known_mcp = METADATA_KEY in flow.metadata
        is_sse = _is_event_stream(response)
        is_json = "json" in response.headers.get("content-type", "").lower()
        if not (known_mcp or is_sse or is_json):
            return  # not worth decoding: neither MCP nor JSON
        if is_sse and not self._may_be_mcp(flow):
            return
        content = self._decoded(flow, response, known_mcp)
        if content is None:
            return
        if is_sse:
            outcome = truncate_sse_body(content, self.limits, self.marker)
            truncations = outcome.cuts
            new_body = outcome.body
            transport = "sse"
        else:
            if not (known_mcp or _looks_like_jsonrpc(content)):
                return
            body_outcome = truncate_jsonrpc_body(content, self.limits, self.marker)
            if body_outcome.body is None:
                # A 202 "Accepted" (text) to a notification is no answer to read.
                if body_outcome.reason != "no string to cut" and known_mcp and is_json:
                    logger.warning("obsmask: MCP answer to %s forwarded unchanged: %s",
                                   where(flow), body_outcome.reason)
                return
            assert body_outcome.truncation is not None
            truncations = [body_outcome.truncation]
            new_body = body_outcome.body
            transport = "json"
        if new_body is None:
            return
        # Encode (compress again, if the server did) on a copy: if that fails,
        # the flow has not been touched.
        changed = response.copy()
        changed.content = new_body
        flow.backup()
        response.raw_content = changed.raw_content
        response.headers = changed.headers
        self.record_cuts(flow, transport, truncations)

    def _decoded(self, flow: http.HTTPFlow, response: http.Response,
                 known_mcp: bool) -> bytes | None:
        try:
            return response.get_content()
        except ValueError as e:
            if known_mcp:
                encoding = response.headers.get("content-encoding", "")
                logger.warning("obsmask: MCP answer to %s forwarded unchanged: cannot decode "
                               "content-encoding %r (%s)", where(flow), encoding, e)
            return None

    def record_cuts(self, flow: http.HTTPFlow, transport: str,
                    truncations: list[TextTruncation]) -> None:
        """Metadata, comment, mark and one log line per truncated message.

        Called once for a buffered answer and once per rewritten event of a
        stream, so the figures add up over the flow.
        """
        summary = flow.metadata.setdefault(METADATA_KEY, {})
        summary["action"] = "truncated"
        summary["transport"] = transport
        for truncation in truncations:
            by_message: dict[int, tuple[int, int, int]] = {}
            for cut in truncation.cuts:
                strings, before, after = by_message.get(cut.message, (0, 0, 0))
                by_message[cut.message] = (
                    strings + 1, before + cut.chars_before, after + cut.chars_after)
            for index, (strings, before, after) in by_message.items():
                logger.info(
                    "obsmask: MCP response id=%s (%s): cut %d string%s, %s -> %s chars",
                    truncation.scan.messages[index].id_text, where(flow), strings,
                    "" if strings == 1 else "s", f"{before:,}", f"{after:,}")
            _add(summary, "messages_truncated", len(by_message))
            _add(summary, "strings_cut", len(truncation.cuts))
            _add(summary, "chars_before", truncation.chars_before)
            _add(summary, "chars_after", truncation.chars_after)
            saved = self._tokens_saved(truncation)
            # Unknown for one event: unknown for the flow.
            if saved is None or summary.get("tokens_saved", 0) is None:
                summary["tokens_saved"] = None
            else:
                _add(summary, "tokens_saved", saved)
        summary["token_encoding"] = self.tokens.encoding_name or (
            "unavailable" if self.tokens.failure else "loading")
        saved_total = summary["tokens_saved"]
        line = (
            f"obsmask: cut {summary['strings_cut']} long string(s) in "
            f"{summary['messages_truncated']} MCP response(s): "
            f"{_count(summary, 'chars_before')} -> {_count(summary, 'chars_after')} chars"
            + (f", {saved_total:,} tokens saved ({summary['token_encoding']})"
               if isinstance(saved_total, int) else "")
        )
        comments = [c for c in (flow.comment or "").split("\n")
                    if c and not c.startswith("obsmask: cut ")]
        flow.comment = "\n".join([*comments, line])
        flow.marked = MARK

    def _tokens_saved(self, truncation: TextTruncation) -> int | None:
        """Tokens of the text cut away, minus the markers; None while the
        encoding loads, or when the text is too long to count on the spot."""
        removed = [cut.removed for cut in truncation.cuts]
        if not self.tokens.ready or any(text is None for text in removed):
            return None
        if sum(len(text) for text in removed if text is not None) > MAX_COUNTED_CHARS:
            return None
        saved = 0
        for cut in truncation.cuts:
            assert cut.removed is not None
            counted = self.tokens.count(cut.removed)
            marker = self.marker.render(cut.chars_before, self.limits.head_chars,
                                        self.limits.tail_chars)
            marker_tokens = self.tokens.count(marker)
            if counted is None or marker_tokens is None:
                return None
            saved += counted - marker_tokens
        return saved


def _add(summary: dict[str, object], key: str, amount: int) -> None:
    previous = summary.get(key, 0)
    summary[key] = (previous if isinstance(previous, int) else 0) + amount


def _count(summary: dict[str, object], key: str) -> str:
    value = summary.get(key)
    return f"{value:,}" if isinstance(value, int) else "n/a"


class _SseTap:
    """mitmproxy's stream callable for an MCP event stream: each chunk is
    rewritten event by event and goes on at once."""

    def __init__(self, addon: McpTruncation, flow: http.HTTPFlow,
                 truncator: SseTruncator) -> None:
        self.addon = addon
        self.flow = flow
        self.truncator = truncator
        self.failed = False

    def __call__(self, chunk: bytes) -> list[bytes]:
        if self.failed:
            return self.truncator.decode_only(chunk)
        try:
            pieces = self.truncator.feed(chunk) if chunk else self.truncator.finish()
            cuts = self.truncator.take_cuts()
            if cuts:
                self.addon.record_cuts(self.flow, "sse", cuts)
            if self.truncator.problem and not chunk:
                logger.warning("obsmask: MCP stream %s: %s", where(self.flow),
                               self.truncator.problem)
            return pieces
        except Exception as e:  # noqa: BLE001 - the stream must go on whatever happens
            self.failed = True
            logger.error("obsmask: internal error in the MCP stream %s, passed on uncut "
                         "from here: %s: %s", where(self.flow), type(e).__name__, e)
            held = self.truncator.release()
            return ([held] if held else []) + self.truncator.decode_only(chunk)
