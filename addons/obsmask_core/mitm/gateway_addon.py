"""The mitmproxy addon that serves the MCP gateway routes,
``/api/mcp-gateway/{server_name}/rpc``: one address for several MCP servers.

A POST is answered here: the relay (``obsmask_core.gateway.relay``, which
says why it exists) asks the server, and its answer becomes the flow's, one
hop as on a direct route. An answer that is an event stream, and every other
method (a GET stream, a DELETE), go through the relay's HTTP server:
mitmproxy forwards the flow to it. Either way the MCP addon cuts the answer
like any other.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from weakref import WeakKeyDictionary

from mitmproxy import connection, ctx, http
from mitmproxy.addonmanager import Loader

from obsmask_core.gateway.errors import (
    CLIENT_NOT_ALLOWED,
    GATEWAY_INTERNAL,
    UNKNOWN_SERVER,
    GatewayFailure,
    error_response,
    request_id_text,
)
from obsmask_core.gateway.relay import (
    ERROR_HEADER,
    KEEP_ALIVE_HEADER,
    PARKED_HEADER,
    REFUSED_HEADER,
    RELAY_HEADER,
    Answer,
    GatewayRelay,
)
from obsmask_core.gateway.upstreams import (
    GATEWAY_SECTION,
    SERVERS_SECTION,
    GatewaySettings,
    Upstream,
    gateway_server_name,
    parse_upstream,
)
from obsmask_core.mitm.flows import MCP_METADATA, add_comment, guarded, log_once_sent, where
from obsmask_core.mitm.options import add_options, check_pending_values, refuse, settings_in_force
from obsmask_core.mitm.settings_addon import FILE_OPTIONS, SettingsFile
from obsmask_core.shared.errors import ConfigError, SettingError
from obsmask_core.shared.networks import Network, client_allowed, client_networks

logger = logging.getLogger(__name__)

PREFIX = "mcpmask_"
SERVERS_OPTION = "mcpmask_gateway_servers"
# While POSTs wait for their servers, how often the addon looks whether
# their clients left (mitmproxy tells no hook): such a call is cancelled,
# which closes its server's connection, as the relay does at once.
CLIENT_CHECK_SECONDS = 0.1
# mitmproxy's addons that act on a request after a script's (they come
# later in its chain), by the options that turn them on, and the intercept
# that holds a flow for the user after every hook. With any of them on, a
# POST goes through the relay as every request once did: the call must
# leave after they acted, not from this addon's hook.
LATER_ADDON_OPTIONS = ("intercept_active", "modify_body", "modify_headers", "map_local",
                       "map_remote", "server_replay", "stickyauth", "stickycookie")


def later_addons_may_act() -> bool:
    """Is an option of one of mitmproxy's later addons on?"""
    return any(getattr(ctx.options, name, None) for name in LATER_ADDON_OPTIONS)


class ClientWatch:
    """The hook tasks waiting for a server, and their clients: one timer for
    all of them cancels the task of a client that left (and remembers it,
    for the task to tell that cancellation from the proxy stopping)."""

    def __init__(self) -> None:
        self._waiting: dict[asyncio.Task[object], connection.Client] = {}
        self._left: set[asyncio.Task[object]] = set()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, task: asyncio.Task[object], client: connection.Client) -> None:
        self._waiting[task] = client
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(CLIENT_CHECK_SECONDS,
                                                                self._check)

    def done(self, task: asyncio.Task[object]) -> bool:
        """Stop watching ``task``: whether it was cancelled because its
        client left."""
        self._waiting.pop(task, None)
        left = task in self._left
        self._left.discard(task)
        return left

    def _check(self) -> None:
        self._timer = None
        for task, client in list(self._waiting.items()):
            if not client.state & connection.ConnectionState.CAN_READ:
                del self._waiting[task]
                self._left.add(task)
                task.cancel()
        if self._waiting:
            self._timer = asyncio.get_running_loop().call_later(CLIENT_CHECK_SECONDS,
                                                                self._check)


class McpGateway:
    """Routes ``/api/mcp-gateway/NAME/rpc`` to the server NAME, through the relay."""

    def __init__(self, settings: SettingsFile) -> None:
        self.settings = settings
        self.servers: dict[str, Upstream] = {}
        self.timeout = float(GatewaySettings().timeout_seconds)
        self.allowed: tuple[Network, ...] = ()
        self.relay = GatewayRelay(lambda: self.servers, lambda: self.timeout)
        self.watch = ClientWatch()
        # Flows sent to the relay from their headers, with the address they
        # had (``requestheaders``); a flow that is dropped drops its entry.
        self._routed_early: WeakKeyDictionary[http.HTTPFlow, tuple[str, str, int]] = \
            WeakKeyDictionary()
        self._options: set[str] = set(FILE_OPTIONS) | {SERVERS_OPTION}

    def load(self, loader: Loader) -> None:
        self._options.update(add_options(loader, GatewaySettings, PREFIX))
        loader.add_option(
            SERVERS_OPTION, Sequence[str], [],
            "Gateway servers as NAME=URL (repeat the option for several), added to "
            "[mcp_gateway.servers] of the settings file: a request to "
            "/api/mcp-gateway/NAME/rpc on the proxy goes to URL.",
        )
        check_pending_values(loader.master.options, [SERVERS_OPTION])

    def configure(self, updated: set[str]) -> None:
        if not updated & self._options:
            return
        config = self.settings.current()
        settings = settings_in_force(
            GatewaySettings, PREFIX, config, GATEWAY_SECTION,
            lambda: config.settings(GatewaySettings, GATEWAY_SECTION,
                                    subtables=("masking", "servers")))
        try:
            servers = {name: _upstream(config.path, name, url)
                       for name, url in config.table(SERVERS_SECTION).items()}
        except ConfigError as e:
            refuse(f"obsmask: {e}")
        for entry in ctx.options.mcpmask_gateway_servers:
            name, sep, url = entry.partition("=")
            if not sep:
                refuse(f"obsmask: {SERVERS_OPTION}: {entry!r} is not NAME=URL")
            try:
                servers[name.strip()] = parse_upstream(name.strip(), url.strip())
            except SettingError as e:
                refuse(f"obsmask: {SERVERS_OPTION}: {e}")
        self.servers, self.timeout = servers, float(settings.timeout_seconds)
        self.allowed = client_networks("allow_clients", settings.allow_clients)
        if servers:
            clients = ", ".join(["loopback", *map(str, self.allowed)])
            logger.info("obsmask: MCP gateway routes /api/mcp-gateway/NAME/rpc for %s "
                        "(timeout %g s; clients: %s)", ", ".join(sorted(servers)),
                        self.timeout, clients)

    def done(self) -> None:
        self.relay.close()

    async def requestheaders(self, flow: http.HTTPFlow) -> None:
        """With ``stream_large_bodies`` on, mitmproxy may stream a body: from
        its headers when they give its size, or once it has buffered that
        much (a chunked body), with no hook then; either way before the
        ``request`` hook, to the flow's address at that moment. So with that
        option on, a gateway request goes to the relay from here; the
        ``request`` hook takes back one buffered whole
        (``_streamed_to_relay``)."""
        if not getattr(ctx.options, "stream_large_bodies", None) or flow.response \
                or (name := gateway_server_name(flow.request.path)) is None:
            return
        with guarded(flow, "forwarded unchanged"):
            failure = self._facts(flow, name)
            self._routed_early[flow] = (flow.request.scheme, flow.request.host,
                                        flow.request.port)
            await self._to_relay(flow, name)
            # One the gateway refuses goes there too, never elsewhere: the
            # relay answers its error (it knows the servers, not the client).
            if failure is not None and failure.code == CLIENT_NOT_ALLOWED:
                flow.request.headers[REFUSED_HEADER] = "1"

    async def request(self, flow: http.HTTPFlow) -> None:
        # A flow read from a file (mitmdump -nr) already has its answer:
        # sending it again would run the tool call again.
        if (name := gateway_server_name(flow.request.path)) is None or flow.response \
                or self._streamed_to_relay(flow):
            return
        with guarded(flow, "forwarded unchanged"):
            await self._route(flow, name)

    def _streamed_to_relay(self, flow: http.HTTPFlow) -> bool:
        """Did the flow's body go to the relay as it came (sent there from
        its headers, then streamed)? Else, one sent there and buffered whole
        is taken back, to be routed as any other."""
        address = self._routed_early.pop(flow, None)
        if address is None:
            return False
        if flow.request.stream:
            facts = flow.metadata.setdefault(MCP_METADATA, {})
            facts["gateway_body_streamed"] = True
            logger.info("obsmask: gateway %s %s -> %s, its body streamed through the relay",
                        flow.request.method, facts.get("gateway_server"),
                        facts.get("gateway_upstream", "no server (refused)"))
            return True
        for header in (RELAY_HEADER, KEEP_ALIVE_HEADER, REFUSED_HEADER):
            flow.request.headers.pop(header, None)
        flow.request.scheme, flow.request.host, flow.request.port = address
        return False

    def _refusal(self, flow: http.HTTPFlow, name: str) -> GatewayFailure | None:
        """Why the gateway does not serve the flow, if it does not."""
        peer = flow.client_conn.peername
        # No peer: a flow the proxy made itself (a client replay), not a client's.
        if peer and not client_allowed(str(peer[0]), self.allowed):
            return GatewayFailure(
                CLIENT_NOT_ALLOWED,
                f"client {peer[0]} is not on the loopback; the gateway serves other clients "
                "only in the networks of mcpmask_gateway_allow_clients "
                "([mcp_gateway] allow_clients)")
        if name not in self.servers:
            known = ", ".join(sorted(self.servers)) or "none configured"
            return GatewayFailure(
                UNKNOWN_SERVER,
                f"no MCP server named {name!r} in [mcp_gateway.servers] (known: {known})")
        return None

    def _facts(self, flow: http.HTTPFlow, name: str) -> GatewayFailure | None:
        """Record the flow's server (and its address, when the gateway
        serves the flow); why the gateway refuses it, if it does."""
        failure = self._refusal(flow, name)
        facts: dict[str, object] = {"gateway_server": name}
        if failure is None:
            facts["gateway_upstream"] = self.servers[name].url
        flow.metadata[MCP_METADATA] = facts
        return failure

    def _server_for(self, flow: http.HTTPFlow, name: str) -> Upstream | None:
        """The server the flow goes to, its facts recorded; None when the
        gateway refuses the flow, which is then answered with its error."""
        failure = self._facts(flow, name)
        if failure is not None:
            self._fail(flow, name, failure)
            return None
        upstream = self.servers[name]
        log_once_sent(flow, logger, "obsmask: gateway %s %s -> %s", flow.request.method, name,
                      upstream.url)
        return upstream

    async def _route(self, flow: http.HTTPFlow, name: str) -> None:
        upstream = self._server_for(flow, name)
        if upstream is None:
            return
        # Over HTTP/2 and HTTP/3 a client gives up by resetting its stream,
        # which no hook sees while the call waits: its POSTs go through the
        # relay, whose connection mitmproxy closes then.
        if flow.request.method == "POST" and flow.request.http_version.startswith("HTTP/1") \
                and not flow.intercepted and not later_addons_may_act():
            # A client must not name a parked stream: only the call below does.
            flow.request.headers.pop(PARKED_HEADER, None)
            parked = await self._call(flow, name, upstream)
            if parked is None:
                return  # answered, failed or left
            flow.request.headers[PARKED_HEADER] = parked
            await self._to_relay(flow, name, parked=True)
            return
        await self._to_relay(flow, name)

    async def _to_relay(self, flow: http.HTTPFlow, name: str, *, parked: bool = False) -> None:
        """Send the flow to the relay: mitmproxy forwards it there, and the
        relay talks to the server (or has the server's event stream already,
        ``parked``); the answer comes back as any other."""
        if not parked:
            # A client must not name a parked stream: only a call does.
            flow.request.headers.pop(PARKED_HEADER, None)
        flow.request.headers.pop(REFUSED_HEADER, None)
        port = await self.relay.ensure_started()
        flow.request.headers[RELAY_HEADER] = name
        # mitmproxy sends the client's next request on the same connection
        # (unless one of them says close), as it would to a server.
        flow.request.headers[KEEP_ALIVE_HEADER] = "1"
        flow.request.scheme = "http"
        flow.request.host = "127.0.0.1"
        flow.request.port = port

    async def _call(self, flow: http.HTTPFlow, name: str, upstream: Upstream) -> str | None:
        """Answer a POST with the server's answer (``GatewayRelay.call``),
        or its error; None then. For an event stream, the token under which
        the relay holds it, for mitmproxy to fetch it through the relay."""
        request = flow.request
        started = time.time()
        task = asyncio.current_task()
        assert task is not None
        # A flow with no live client (read from a file) is not watched.
        if flow.client_conn.state & connection.ConnectionState.CAN_READ:
            self.watch.add(task, flow.client_conn)
        try:
            answer = await self.relay.call(
                upstream, b"POST", request.data.path.partition(b"?")[2],
                list(request.headers.fields), request.raw_content or b"")
        except asyncio.CancelledError:
            if not self.watch.done(task):
                raise  # the proxy stops: not ours to handle
            task.uncancel()
            logger.debug("obsmask: %s: the client left before the server answered",
                         where(flow))
            if flow.killable:
                flow.kill()
            return None
        except GatewayFailure as failure:
            self._fail(flow, name, failure)
            return None
        except Exception as e:  # the client gets an answer whatever happens
            logger.exception("obsmask: gateway: internal error")
            # The type only: an exception's message may quote request bytes.
            self._fail(flow, name, GatewayFailure(GATEWAY_INTERNAL,
                                                  f"internal error: {type(e).__name__}"))
            return None
        finally:
            self.watch.done(task)
        if isinstance(answer, str):
            return answer
        flow.response = _response(answer, request.http_version, started)
        return None

    @staticmethod
    def _fail(flow: http.HTTPFlow, name: str, failure: GatewayFailure) -> None:
        """Answer the flow with the gateway's JSON-RPC error, and log one line."""
        body = flow.request.get_content(strict=False) or b""
        id_text = request_id_text(body) if flow.request.method == "POST" else None
        answer = error_response(id_text, failure, name)
        flow.response = http.Response.make(answer.status, answer.body,
                                           {"content-type": "application/json"})
        flow.metadata[MCP_METADATA]["gateway_error"] = failure.code
        add_comment(flow, answer.message)
        logger.warning("obsmask: %s: %s (JSON-RPC error %d)", where(flow), answer.message,
                       failure.code)

    def response(self, flow: http.HTTPFlow) -> None:
        """The relay answered with an error of its own: say so, like the
        gateway's other errors, and keep the internal header from the client.
        (Its error answers are small JSON bodies, never streamed: their
        headers go to the client after this hook.)"""
        response = flow.response
        if response is None or ERROR_HEADER not in response.headers:
            return
        if gateway_server_name(flow.request.path) is None:
            return  # not from our relay: some server's header, left alone
        code = response.headers.pop(ERROR_HEADER)
        facts = flow.metadata.setdefault(MCP_METADATA, {})
        facts["gateway_error"] = int(code) if code.lstrip("-").isdigit() else code
        try:
            message = str(json.loads(response.content or b"{}")["error"]["message"])
        except (ValueError, KeyError, TypeError):
            message = f"obsmask gateway: error {code}"
        add_comment(flow, message)
        logger.warning("obsmask: %s: %s (JSON-RPC error %s)", where(flow), message, code)


def _response(answer: Answer, http_version: str, started: float) -> http.Response:
    """The server's answer as the flow's, its body as it came."""
    response = http.Response(http_version.encode(), answer.status, answer.reason,
                             http.Headers(answer.headers), answer.body, None, started,
                             time.time())
    response.headers["content-length"] = str(len(answer.body))
    return response


def _upstream(path: str | None, name: str, url: object) -> Upstream:
    try:
        if not isinstance(url, str):
            raise SettingError(name, "must be a URL string")
        return parse_upstream(name, url)
    except SettingError as e:
        raise ConfigError(f"{path}: [{'.'.join(SERVERS_SECTION)}] {e.key}: {e.message}") from None
