"""Read obsmask's settings from ``mitm.toml``.

Only the file's own errors are decided here (syntax, unknown keys, wrong types,
out-of-range values), each reported with the file and the key. Which value
wins over which (defaults < file < mitmproxy options) is the addon's business.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import tomli

from obsmask_core.policy import PolicyError, check_policy_value

DEFAULT_CONFIG_NAME = "mitm.toml"
SCHEMA1_SECTION = ("observation_masking", "schema1")


class ConfigError(ValueError):
    """The configuration file cannot be used; the message names file and key."""


@dataclass(frozen=True)
class ConfigFile:
    """The settings found in one file (``path`` None: no file, built-in defaults)."""

    path: str | None
    schema1: dict[str, object]


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
    return ConfigFile(path=chosen, schema1=schema1)
