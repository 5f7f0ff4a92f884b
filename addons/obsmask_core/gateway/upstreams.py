"""The servers behind the gateway, its routes, and its settings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from obsmask_core.gateway.errors import CLIENT_NOT_ALLOWED, UNKNOWN_SERVER, GatewayFailure
from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.networks import Network, check_networks, client_allowed
from obsmask_core.shared.settings import check_fields, setting

GATEWAY_SECTION = ("mcp_gateway",)
SERVERS_SECTION = ("mcp_gateway", "servers")
GATEWAY_PATH = re.compile(r"^/api/mcp-gateway/([^/?#]+)/rpc/?(?:\?.*)?$")
DEFAULT_TIMEOUT_SECONDS = 300


@dataclass(frozen=True, kw_only=True)
class GatewaySettings:
    """The keys of ``[mcp_gateway]`` itself (its tables ``masking`` and
    ``servers`` are read apart)."""

    timeout_seconds: int = setting(DEFAULT_TIMEOUT_SECONDS, """
        Seconds the gateway waits for a server to accept a connection, to take
        the request, to begin its answer, and for each next bytes of an answer
        that is not an event stream, before it answers the client with a
        JSON-RPC timeout error (-32053).""", minimum=1, option="gateway_timeout")
    allow_clients: tuple[str, ...] = setting((), """
        Networks besides the loopback (127.0.0.0/8, ::1) whose clients may use
        the gateway routes, e.g. 192.168.1.0/24, or 0.0.0.0/0 and ::/0 for
        any. A client elsewhere gets a JSON-RPC error (-32056): the gateway
        reaches the MCP servers behind it (local ones too) for whoever may
        use it.""", check=check_networks, option="gateway_allow_clients")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class Upstream:
    """A server of ``[mcp_gateway.servers]``."""

    name: str
    url: str
    scheme: str
    host: str
    port: int
    target: str  # path and query posted to ("/" for a bare base URL)

    @property
    def authority(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(frozen=True)
class GatewaySpec:
    """The gateway in force: its servers by name, how long it waits for one
    (``timeout_seconds``), and the networks besides the loopback whose
    clients it serves."""

    servers: Mapping[str, Upstream] = field(default_factory=dict)
    timeout: float = float(DEFAULT_TIMEOUT_SECONDS)
    allowed: tuple[Network, ...] = ()

    def refusal(self, client: str | None, name: str) -> GatewayFailure | None:
        """Why the gateway does not serve a request for the server ``name``
        from ``client`` (its address; None for a request the proxy made
        itself, a client replay), if it does not."""
        if client is not None and not client_allowed(client, self.allowed):
            return GatewayFailure(
                CLIENT_NOT_ALLOWED,
                f"client {client} is not on the loopback; the gateway serves other clients "
                "only in the networks of mcpmask_gateway_allow_clients "
                "([mcp_gateway] allow_clients)")
        if name not in self.servers:
            known = ", ".join(sorted(self.servers)) or "none configured"
            return GatewayFailure(
                UNKNOWN_SERVER,
                f"no MCP server named {name!r} in [mcp_gateway.servers] (known: {known})")
        return None


def check_server(name: str, url: object) -> None:
    """Raise SettingError unless ``name = url`` is a server of
    ``[mcp_gateway.servers]``."""
    if not isinstance(url, str):
        raise SettingError(name, "must be a URL string")
    parse_upstream(name, url)


def parse_upstream(name: str, url: str) -> Upstream:
    """Raise SettingError unless ``url`` is an http(s) URL with a host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise SettingError(name, f"not a URL ({e})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingError(name, f"{url!r} is not an http:// or https:// URL with a host")
    if not re.fullmatch(r"[A-Za-z0-9._~-]+", name):
        raise SettingError(name, "a server name may hold letters, digits and . _ ~ - only")
    if parts.username is not None or parts.password is not None:
        raise SettingError(name, "no user:password@ in the URL (it would show in logs and "
                                "errors); put credentials in headers the client sends")
    if port == 0:
        raise SettingError(name, f"{url!r} has port 0")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if not re.fullmatch(r"[\x21-\x7e]+", target):
        raise SettingError(name, f"{url!r}: the path must be ASCII without spaces "
                                "(percent-encode the rest)")
    default = 443 if parts.scheme == "https" else 80
    upstream = Upstream(name, url, parts.scheme, parts.hostname, port or default, target)
    try:
        upstream.authority.encode("idna")
    except UnicodeError as e:
        raise SettingError(name, f"{url!r}: not a valid host name ({e})") from None
    return upstream


def gateway_server_name(path: str) -> str | None:
    """The server name of a gateway path, or None for any other path."""
    found = GATEWAY_PATH.match(path)
    return unquote(found.group(1)) if found else None
