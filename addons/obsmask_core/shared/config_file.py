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
and out-of-range values), each reported with the file, its line and the
key; given the tables obsmask reads (``shared/table_check.py``), a table or
key that is none of theirs too, with the closest known name. Which value
wins over which (defaults < file < mitmproxy options) is the business of
the code that registers the options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import tomli

from obsmask_core.shared.errors import ConfigError, SettingError
from obsmask_core.shared.settings import values_from_table
from obsmask_core.shared.table_check import FileTable, problems
from obsmask_core.shared.toml_lines import Names, line_of, toml_lines

DEFAULT_CONFIG_NAME = "mitm.toml"
# The recommended settings the package ships (package data), read when there
# is no mitm.toml in the current directory; what ``obsmask init`` writes.
RECOMMENDED_CONFIG = Path(__file__).with_name("recommended_mitm.toml")
# Where such settings came from, as the start-up line says it.
RECOMMENDED_SOURCE = f"obsmask's recommended settings (no {DEFAULT_CONFIG_NAME} here)"


@dataclass(frozen=True)
class ConfigFile:
    """The parsed settings file (``path`` None: no file, built-in defaults),
    and the line of each of its tables and keys."""

    path: str | None
    document: dict[str, object] = field(default_factory=dict)
    lines: Mapping[Names, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def recommended(self) -> bool:
        """The package's recommended settings, read for want of a mitm.toml."""
        return self.path == str(RECOMMENDED_CONFIG)

    @property
    def source(self) -> str:
        if self.recommended:
            return RECOMMENDED_SOURCE
        return self.path or "built-in defaults"

    def at(self, names: Names) -> str:
        """Where ``names`` is written: ``path:line`` (or the path alone)."""
        line = line_of(self.lines, names)
        return f"{self.path}:{line}" if line is not None else str(self.path)

    def table(self, names: tuple[str, ...]) -> dict[str, object]:
        """The table ``[names...]`` (empty if absent); ConfigError if one of
        its levels is not a table."""
        table: object = self.document
        for depth, name in enumerate(names):
            assert isinstance(table, dict)
            table = table.get(name, {})
            if not isinstance(table, dict):
                dotted = ".".join(names[: depth + 1])
                raise ConfigError(f"{self.at(names[: depth + 1])}: [{dotted}] must be a table")
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
            raise ConfigError(f"{self.at((*names, e.key))}: [{'.'.join(names)}] {e.key}: "
                              f"{e.message}") from None


def switch_origin(option: str, explicit: bool, config: ConfigFile,
                  tables: Sequence[Names], key: str = "enabled") -> str:
    """Where a switch's false came from, for a start-up line: ``--set``
    (``explicit``), else the first of ``tables`` (a profile's before the
    one it overlays) that holds ``key``, else the built-in default: never a
    table or key the file does not hold."""
    if explicit:
        return f"--set {option}=false"
    for names in tables:
        if key in config.table(names):
            return f"{config.source} [{'.'.join(names)}] {key} = false"
    return f"built-in default, not set in {config.source}" if config.path else config.source


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


def parse_config(found: tuple[str, bytes] | None,
                 tables: Sequence[FileTable] | None = None) -> ConfigFile:
    """The settings file of read_config_bytes, parsed; with ``tables``
    (every table obsmask reads), ConfigError for the first name or value
    that is not one of theirs."""
    if found is None:
        return ConfigFile(path=None)
    chosen, data = found
    try:
        text = data.decode("utf-8")
        document = tomli.loads(text)
    except UnicodeDecodeError as e:
        raise ConfigError(f"{chosen}: not valid TOML: not UTF-8 (byte {e.start})") from None
    except tomli.TOMLDecodeError as e:
        raise ConfigError(f"{chosen}: not valid TOML: {e}") from None
    config = ConfigFile(path=chosen, document=document, lines=toml_lines(text))
    if tables is not None:
        check_names(config, tables)
    return config


def check_names(config: ConfigFile, tables: Sequence[FileTable]) -> None:
    """ConfigError for the first (by line) table, key or value of the file
    that is none of ``tables``' or not acceptable, saying how many more."""
    found = sorted(problems(config.document, tables),
                   key=lambda problem: line_of(config.lines, problem.names) or 0)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ConfigError(f"{config.at(found[0].names)}: {found[0].message}{more}")


def load_config(path: str | None, tables: Sequence[FileTable] | None = None) -> ConfigFile:
    """Read and parse ``path``, or ``mitm.toml`` in the current directory
    (checked against ``tables`` when given)."""
    return parse_config(read_config_bytes(path), tables)
