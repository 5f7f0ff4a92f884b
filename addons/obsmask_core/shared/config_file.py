"""Read obsmask's settings file, ``mitm.toml``.

Which file: the one named (``obsmask_config``), else ``mitm.toml`` in the
current directory, else the recommended settings that ship inside the
package (``recommended_mitm.toml`` beside this module, a copy of the
checkout's ``mitm.toml``; tests/unit/test_recommended_settings.py keeps the
two equal). Only when the package's copy is missing do the built-in
defaults (each setting's declared default: the specification's) apply; a
file's ``[observation_masking.profiles.spec]`` gives them back.

Only the file's own errors are decided here (syntax, a table that is not a
table, and, through each feature's settings class, unknown keys, wrong types
and out-of-range values), each reported with the file and the key. Which
value wins over which (defaults < file < mitmproxy options) is the
business of the code that registers the options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tomli

from obsmask_core.shared.errors import ConfigError, SettingError
from obsmask_core.shared.settings import values_from_table

DEFAULT_CONFIG_NAME = "mitm.toml"
# The recommended settings the package ships (package data), read when there
# is no mitm.toml in the current directory; what ``obsmask init`` writes.
RECOMMENDED_CONFIG = Path(__file__).with_name("recommended_mitm.toml")
# Where such settings came from, as the start-up line says it.
RECOMMENDED_SOURCE = f"obsmask's recommended settings (no {DEFAULT_CONFIG_NAME} here)"


@dataclass(frozen=True)
class ConfigFile:
    """The parsed settings file (``path`` None: no file, built-in defaults)."""

    path: str | None
    document: dict[str, object] = field(default_factory=dict)

    @property
    def recommended(self) -> bool:
        """The package's recommended settings, read for want of a mitm.toml."""
        return self.path == str(RECOMMENDED_CONFIG)

    @property
    def source(self) -> str:
        if self.recommended:
            return RECOMMENDED_SOURCE
        return self.path or "built-in defaults"

    def table(self, names: tuple[str, ...]) -> dict[str, object]:
        """The table ``[names...]`` (empty if absent); ConfigError if one of
        its levels is not a table."""
        table: object = self.document
        for depth, name in enumerate(names):
            assert isinstance(table, dict)
            table = table.get(name, {})
            if not isinstance(table, dict):
                dotted = ".".join(names[: depth + 1])
                raise ConfigError(f"{self.path}: [{dotted}] must be a table")
        assert isinstance(table, dict)
        return table

    def settings(
        self, cls: type, names: tuple[str, ...], *, subtables: tuple[str, ...] = ()
    ) -> dict[str, object]:
        """The typed values of table ``names`` for the settings class ``cls``
        (the tables named in ``subtables`` are left out)."""
        table = {k: v for k, v in self.table(names).items() if k not in subtables}
        try:
            return values_from_table(cls, table)
        except SettingError as e:
            raise ConfigError(f"{self.path}: [{'.'.join(names)}] {e.key}: {e.message}") from None


def read_config_bytes(path: str | None) -> tuple[str, bytes] | None:
    """The file to read (``path``, or ``mitm.toml`` in the current directory
    when None, or else the package's recommended settings) and its bytes;
    None when none of them is there (the built-in defaults apply). An
    explicit path that does not exist is an error."""
    chosen = path if path is not None else DEFAULT_CONFIG_NAME
    try:
        with open(chosen, "rb") as file:
            return chosen, file.read()
    except FileNotFoundError:
        if path is not None:
            raise ConfigError(f"{chosen}: configuration file not found") from None
        return _recommended_bytes()
    except OSError as e:
        raise ConfigError(f"{chosen}: cannot be read: {e.strerror}") from None


def _recommended_bytes() -> tuple[str, bytes] | None:
    try:
        return str(RECOMMENDED_CONFIG), RECOMMENDED_CONFIG.read_bytes()
    except OSError:  # a package without its data: the built-in defaults
        return None


def parse_config(found: tuple[str, bytes] | None) -> ConfigFile:
    """The settings file of read_config_bytes, parsed."""
    if found is None:
        return ConfigFile(path=None)
    chosen, data = found
    try:
        document = tomli.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{chosen}: not valid TOML: not UTF-8 (byte {e.start})") from None
    except tomli.TOMLDecodeError as e:
        raise ConfigError(f"{chosen}: not valid TOML: {e}") from None
    return ConfigFile(path=chosen, document=document)


def load_config(path: str | None) -> ConfigFile:
    """Read and parse ``path``, or ``mitm.toml`` in the current directory."""
    return parse_config(read_config_bytes(path))
