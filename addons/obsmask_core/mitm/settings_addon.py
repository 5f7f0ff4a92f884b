"""The addon that owns the settings file: the options ``obsmask_config`` and
``obsmask_profile``, mitm.toml read once for every feature, the master switch
of both features (``[obsmask] enabled``, ``obsmask_all_enabled``), and the
check of unknown ``obsmask_*``/``mcpmask_*`` options at start-up."""

from __future__ import annotations

from typing import Optional, TypeVar, cast

from mitmproxy import ctx
from mitmproxy.addonmanager import Loader

from obsmask_core.conversation.settings.policy import PROFILES_SECTION
from obsmask_core.mitm.file_tables import FILE_TABLES
from obsmask_core.mitm.options import (
    add_options,
    check_unknown_options,
    option_values,
    refuse,
    set_explicitly,
    settings_in_force,
)
from obsmask_core.shared.config_file import (
    ConfigFile,
    parse_config,
    read_config_bytes,
    switch_origin,
)
from obsmask_core.shared.errors import ConfigError
from obsmask_core.shared.master_switch import (
    SWITCH_OPTION,
    SWITCH_PREFIX,
    SWITCH_SECTION,
    MasterSwitch,
)
from obsmask_core.shared.settings import build, declared

# A change of any of these makes every feature read its settings again.
FILE_OPTIONS = frozenset({"obsmask_config", "obsmask_profile", SWITCH_OPTION})
_Settings = TypeVar("_Settings")


class SettingsFile:
    """Reads the settings file when its option changes (or the file does);
    the feature addons ask ``current()`` in their ``configure``.

    It comes first in the addon list, so a file that is not valid TOML is
    reported once, before any feature reads it.
    """

    def __init__(self) -> None:
        self._loaded: tuple[tuple[str, bytes] | None, ConfigFile] | None = None

    def load(self, loader: Loader) -> None:
        add_options(loader, MasterSwitch, SWITCH_PREFIX)
        loader.add_option(
            "obsmask_config",
            cast(type, Optional[str]),  # noqa: UP045 - mitmproxy compares with typing.Optional
            None,
            "The TOML file with obsmask's settings. When unset, mitm.toml in the current "
            "directory is read if there is one, else the recommended settings shipped with "
            "obsmask (what obsmask init writes; profile spec: the built-in defaults). A file "
            "named here must exist; an empty one means the built-in defaults. Options set "
            "with --set win over the file.",
        )
        loader.add_option(
            "obsmask_profile",
            str,
            "",
            "A profile of the settings file ([observation_masking.profiles.NAME]) whose "
            "keys replace those of [observation_masking.schema1], e.g. no_cache for a "
            "provider without a prompt cache. Empty: none.",
        )

    def configure(self, updated: set[str]) -> None:
        if "obsmask_config" in updated:
            # Every addon of the script has loaded (mitmproxy calls each
            # load before the first configure): a name still waiting is one
            # that none of them registered.
            check_unknown_options(ctx.options)
            self.current()

    def current(self) -> ConfigFile:
        """The settings file named by ``obsmask_config`` (or mitm.toml),
        parsed again only when its name or its bytes changed; OptionsError
        if it cannot be used, or holds a table or key that no feature reads
        (``FILE_TABLES``)."""
        try:
            found = read_config_bytes(ctx.options.obsmask_config)
            if self._loaded is None or self._loaded[0] != found:
                self._loaded = (found, parse_config(found, FILE_TABLES))
        except ConfigError as e:
            refuse(f"obsmask: {e}")
        return self._loaded[1]

    def switched(
        self, settings: _Settings, prefix: str, config: ConfigFile, section: tuple[str, ...],
        *, profile: str = "",
    ) -> tuple[_Settings, str]:
        """A feature's settings in force (``settings_in_force``), with
        ``enabled`` false when the master switch is off; and where they came
        from, for its start-up line: the switch that turned the feature off,
        or the file (and ``profile``) and the options set with ``--set``."""
        switch = settings_in_force(MasterSwitch, SWITCH_PREFIX, config, SWITCH_SECTION,
                                   lambda: config.settings(MasterSwitch, SWITCH_SECTION))
        if not switch.enabled:
            values = {item.key: getattr(settings, item.key) for item in declared(type(settings))}
            off = build(type(settings), {**values, "enabled": False})
            return off, switch_origin(SWITCH_OPTION, set_explicitly(SWITCH_OPTION), config,
                                      [SWITCH_SECTION])
        if not getattr(settings, "enabled", True):
            # A profile's table is read over the feature's own.
            tables = [(*PROFILES_SECTION, profile)] if profile else []
            return settings, switch_origin(prefix + "enabled", set_explicitly(prefix + "enabled"),
                                           config, [*tables, section])
        explicit = sorted(prefix + key
                          for key in option_values(type(settings), prefix, only_set=True))
        source = config.source + (f", profile {profile}" if profile else "")
        return settings, source + (f", --set {', '.join(explicit)}" if explicit else "")

