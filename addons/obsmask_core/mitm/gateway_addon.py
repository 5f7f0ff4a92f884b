"""The mitmproxy addon that serves the MCP gateway routes,
``/api/mcp-gateway/{server_name}/rpc``: one address for several MCP servers.

A POST is answered here: the relay (``obsmask_core.gateway.relay``, which
says why it exists) asks the server, and its answer becomes the flow's, one
hop as on a direct route. An answer that is an event stream, and every other
method (a GET stream, a DELETE), go through the relay's HTTP server:
mitmproxy forwards the flow to it (``mitm/gateway_routing.py``). Either way
the MCP addon cuts the answer like any other.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from weakref import WeakKeyDictionary

from mitmproxy import ctx, http
from mitmproxy.addonmanager import Loader

from obsmask_core.gateway.errors import CLIENT_NOT_ALLOWED
from obsmask_core.gateway.headers import (
    ERROR_HEADER,
    KEEP_ALIVE_HEADER,
    REFUSED_HEADER,
    RELAY_HEADER,
)
from obsmask_core.gateway.relay import GatewayRelay
from obsmask_core.gateway.upstreams import (
    GATEWAY_SECTION,
    SERVERS_SECTION,
    GatewaySettings,
    GatewaySpec,
    Upstream,
    check_server,
    gateway_server_name,
    parse_upstream,
)
from obsmask_core.mitm.file_tables import inner_tables
from obsmask_core.mitm.flows import MCP_METADATA, add_comment, guarded, where
from obsmask_core.mitm.gateway_routing import GatewayRouting
from obsmask_core.mitm.options import add_options, check_pending_values, refuse, settings_in_force
from obsmask_core.mitm.settings_addon import FILE_OPTIONS, SettingsFile
from obsmask_core.shared.config_file import ConfigFile
from obsmask_core.shared.errors import ConfigError, SettingError
from obsmask_core.shared.networks import client_networks
from obsmask_core.shared.request_record import McpKey

logger = logging.getLogger(__name__)

PREFIX = "mcpmask_"
SERVERS_OPTION = "mcpmask_gateway_servers"


def parse_gateway(config: ConfigFile, settings: GatewaySettings,
                  entries: Sequence[str]) -> GatewaySpec:
    """The gateway that the settings file and the options give: the servers
    of ``[mcp_gateway.servers]``, then those of ``mcpmask_gateway_servers``
    (NAME=URL entries). ConfigError names the file's key of a server that
    is not one, SettingError the option's entry."""
    servers = {name: _upstream(config, name, url)
               for name, url in config.table(SERVERS_SECTION).items()}
    for entry in entries:
        name, sep, url = entry.partition("=")
        if not sep:
            raise SettingError(SERVERS_OPTION, f"{entry!r} is not NAME=URL")
        try:
            servers[name.strip()] = parse_upstream(name.strip(), url.strip())
        except SettingError as e:
            raise SettingError(SERVERS_OPTION, str(e)) from None
    return GatewaySpec(servers, float(settings.timeout_seconds),
                       client_networks("allow_clients", settings.allow_clients))


def _upstream(config: ConfigFile, name: str, url: object) -> Upstream:
    try:
        check_server(name, url)
    except SettingError as e:
        raise ConfigError(f"{config.at((*SERVERS_SECTION, name))}: "
                          f"[{'.'.join(SERVERS_SECTION)}] {e.key}: {e.message}") from None
    assert isinstance(url, str)
    return parse_upstream(name, url)


class McpGateway:
    """Routes ``/api/mcp-gateway/NAME/rpc`` to the server NAME, through the relay."""

    def __init__(self, settings: SettingsFile) -> None:
        self.settings = settings
        self.spec = GatewaySpec()
        self.relay = GatewayRelay(lambda: self.spec.servers, lambda: self.spec.timeout)
        self.routing = GatewayRouting(self.relay)
        # Flows sent to the relay from their headers, with the address they
        # had (``requestheaders``); a flow that is dropped drops its entry.
        self._routed_early: WeakKeyDictionary[http.HTTPFlow, tuple[str, str, int]] = \
            WeakKeyDictionary()
        self._options: set[str] = set(FILE_OPTIONS) | {SERVERS_OPTION}

    @property
    def servers(self) -> Mapping[str, Upstream]:
        return self.spec.servers

    @property
    def timeout(self) -> float:
        return self.spec.timeout

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
                                    subtables=inner_tables(GATEWAY_SECTION)))
        try:
            self.spec = parse_gateway(config, settings, ctx.options.mcpmask_gateway_servers)
        except (ConfigError, SettingError) as e:
            refuse(f"obsmask: {e}")
        if self.spec.servers:
            clients = ", ".join(["loopback", *map(str, self.spec.allowed)])
            logger.info("obsmask: MCP gateway routes /api/mcp-gateway/NAME/rpc for %s "
                        "(timeout %g s; clients: %s)", ", ".join(sorted(self.spec.servers)),
                        self.spec.timeout, clients)

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
            failure = self.routing.facts(flow, name, self.spec)
            self._routed_early[flow] = (flow.request.scheme, flow.request.host,
                                        flow.request.port)
            await self.routing.to_relay(flow, name)
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
            await self.routing.route(flow, name, self.spec)

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
                        flow.request.method, facts.get(McpKey.GATEWAY_SERVER),
                        facts.get(McpKey.GATEWAY_UPSTREAM, "no server (refused)"))
            return True
        for header in (RELAY_HEADER, KEEP_ALIVE_HEADER, REFUSED_HEADER):
            flow.request.headers.pop(header, None)
        flow.request.scheme, flow.request.host, flow.request.port = address
        return False

    def response(self, flow: http.HTTPFlow) -> None:
        """The relay answered with an error of its own: say so, like the
        gateway's other errors, and keep the internal header from the client.
        (Its error answers are small JSON bodies, never streamed: their
        headers go to the client after this hook.) The header on an answer
        to another path is some server's, left alone."""
        if (response := flow.response) is None or ERROR_HEADER not in response.headers \
                or gateway_server_name(flow.request.path) is None:
            return
        code = response.headers.pop(ERROR_HEADER)
        facts = flow.metadata.setdefault(MCP_METADATA, {})
        facts[McpKey.GATEWAY_ERROR] = int(code) if code.lstrip("-").isdigit() else code
        try:
            message = str(json.loads(response.content or b"{}")["error"]["message"])
        except (ValueError, KeyError, TypeError):
            message = f"obsmask gateway: error {code}"
        add_comment(flow, message)
        logger.warning("obsmask: %s: %s (JSON-RPC error %s)", where(flow), message, code)
