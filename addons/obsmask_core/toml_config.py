"""Read obsmask's settings from ``mitm.toml``.

Only the file's own errors are decided here (syntax, unknown keys, wrong types,
out-of-range values), each reported with the file and the key. Which value
wins over which (defaults < file < mitmproxy options) is the addon's business.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import tomli

from obsmask_core.gateway import check_gateway_value, check_server_url
from obsmask_core.jsonrpc_truncation import check_truncation_value
from obsmask_core.policy import PolicyError, check_policy_value

DEFAULT_CONFIG_NAME = "mitm.toml"
SCHEMA1_SECTION = ("observation_masking", "schema1")
PROFILES_SECTION = ("observation_masking", "profiles")
GATEWAY_SECTION = ("mcp_gateway",)
MCP_MASKING_SECTION = ("mcp_gateway", "masking")
MCP_SERVERS_SECTION = ("mcp_gateway", "servers")


class ConfigError(ValueError):
    """The configuration file cannot be used; the message names file and key."""


@dataclass(frozen=True)
class ConfigFile:
    """The settings found in one file (``path`` None: no file, built-in defaults)."""

    path: str | None
    schema1: dict[str, object]
    # [observation_masking.profiles.<name>]: named sets of keys that a user
    # selects with the obsmask_profile option, over [..schema1].
    profiles: dict[str, dict[str, object]] = field(default_factory=dict)
    # [mcp_gateway.masking]: MCP truncation keys; [mcp_gateway.servers]: name
    # -> URL of the gateway routes; [mcp_gateway]: the gateway's own keys.
    mcp_masking: dict[str, object] = field(default_factory=dict)
    mcp_servers: dict[str, str] = field(default_factory=dict)
    mcp_gateway: dict[str, object] = field(default_factory=dict)

    def values(self, profile: str | None) -> dict[str, object]:
        """The policy keys of [..schema1], overlaid with ``profile``'s."""
        values = dict(self.schema1)
        if profile:
            if profile not in self.profiles:
                known = ", ".join(sorted(self.profiles)) or "none"
                where = self.path or "the built-in defaults"
                raise ConfigError(f"{where}: no profile {profile!r} (profiles: {known})")
            values.update(self.profiles[profile])
        return values


def _section(document: dict[str, object], path: str, names: tuple[str, ...]) -> dict[str, object]:
    table: object = document
    for depth, name in enumerate(names):
        if not isinstance(table, dict):
            break
        table = table.get(name, {})
        if not isinstance(table, dict):
            dotted = ".".join(names[: depth + 1])
            raise ConfigError(f"{path}: [{dotted}] must be a table")
    return table if isinstance(table, dict) else {}


def read_section(
    document: dict[str, object],
    path: str,
    names: tuple[str, ...],
    check: Callable[[str, object], None],
) -> dict[str, object]:
    """The checked key/value pairs of table ``names`` (empty if it is absent)."""
    table = _section(document, path, names)
    dotted = ".".join(names)
    values: dict[str, object] = {}
    for key, value in table.items():
        try:
            check(key, value)
        except PolicyError as e:
            raise ConfigError(f"{path}: [{dotted}] {key}: {e.message}") from None
        values[key] = value
    return values


def load_config(path: str | None) -> ConfigFile:
    """Read ``path``, or ``mitm.toml`` in the current directory when None.

    An explicit path that does not exist is an error; a missing default file
    just means the built-in defaults.
    """
    explicit = path is not None
    chosen = path if path is not None else DEFAULT_CONFIG_NAME
    if not os.path.exists(chosen):
        if explicit:
            raise ConfigError(f"{chosen}: configuration file not found")
        return ConfigFile(path=None, schema1={})
    try:
        with open(chosen, "rb") as file:
            document = tomli.load(file)
    except tomli.TOMLDecodeError as e:
        raise ConfigError(f"{chosen}: not valid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"{chosen}: cannot be read: {e.strerror}") from None
    schema1 = read_section(document, chosen, SCHEMA1_SECTION, check_policy_value)
    profiles = {
        name: read_section(document, chosen, (*PROFILES_SECTION, name), check_policy_value)
        for name in _section(document, chosen, PROFILES_SECTION)
    }
    gateway = {
        key: value
        for key, value in _section(document, chosen, GATEWAY_SECTION).items()
        if key not in ("masking", "servers")
    }
    for key, value in gateway.items():
        try:
            check_gateway_value(key, value)
        except PolicyError as e:
            raise ConfigError(f"{chosen}: [mcp_gateway] {key}: {e.message}") from None
    servers = read_section(document, chosen, MCP_SERVERS_SECTION, check_server_url)
    return ConfigFile(
        path=chosen,
        schema1=schema1,
        profiles=profiles,
        mcp_masking=read_section(document, chosen, MCP_MASKING_SECTION, check_truncation_value),
        mcp_servers={name: str(url) for name, url in servers.items()},
        mcp_gateway=gateway,
    )
