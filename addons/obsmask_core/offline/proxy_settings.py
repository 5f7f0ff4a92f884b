"""The settings the proxy would run with, for the scripts that replay
recorded traffic (measure.py, report.py): taken exactly as the proxy takes
them, so that neither script has a reader of its own.

Each wins over the one before: the built-in defaults (``MaskPolicy``'s
declarations), the settings file's ``[observation_masking.schema1]`` (the
file of ``--config``, else ./mitm.toml when there is one, as the proxy), the
profile's ``[observation_masking.profiles.NAME]`` (``--profile``), then the
``--set`` options. The master switch (``[obsmask] enabled``,
``obsmask_all_enabled``) turns masking off as it does in the proxy; the
routes (``obsmask_*_route``, ``obsmask_hosts``) say which flows are
conversations and in which format.

Nothing is listed twice: the options are the ones the proxy's own addons
register (their ``load`` is run against a bare mitmproxy option manager), so
the names, types and value syntax of ``--set`` are the proxy's, parsed by
mitmproxy's own code; the file is read by ``shared/config_file.py`` and the
values checked by ``shared/settings.py``.

The options are mitm/'s (``option_values.py``), imported when settings are
read, not when this module is, so that the replay and the report load
without mitmproxy (tests/test_layout.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from obsmask_core.conversation.masking.summary import describe_policy
from obsmask_core.conversation.settings.policy import (
    POLICY_SECTION,
    PROFILES_SECTION,
    MaskPolicy,
    policy_values,
)
from obsmask_core.conversation.settings.routes import Routes
from obsmask_core.offline.errors import OfflineError
from obsmask_core.shared.config_file import ConfigFile, load_config, switch_origin
from obsmask_core.shared.errors import ConfigError, SettingError
from obsmask_core.shared.master_switch import (
    SWITCH_OPTION,
    SWITCH_PREFIX,
    SWITCH_SECTION,
    MasterSwitch,
)
from obsmask_core.shared.settings import build, declared, typed_value

if TYPE_CHECKING:  # imported when settings are read (the module docstring says why)
    from obsmask_core.mitm.option_values import ProxyOptions

# The proxy's option prefix (mitm/conversation_addon.py PREFIX).
PREFIX = "obsmask_"
# The two options of the settings addon that are no setting of a class:
# which file, and which of its profiles (``--config`` and ``--profile`` set them).
CONFIG_OPTION = "obsmask_config"
PROFILE_OPTION = "obsmask_profile"
_Settings = TypeVar("_Settings")


class SettingsRefused(OfflineError):
    """An unknown option, a wrong value or a settings file that cannot be
    used. The message is one line without the script's name: each entry
    script puts its own name before it (measure.py then exits with status 2,
    as for a command line error)."""


@dataclass(frozen=True)
class ProxySettings:
    """The settings in force, and where they came from."""

    policy: MaskPolicy
    routes: Routes
    source: str  # as the proxy's start-up line says it
    # The settings file read (its ``path`` None: there was none) and the
    # profile chosen ("" for none), for a script that says in its own words
    # where the values come from.
    config: ConfigFile
    profile: str
    # The master switch in force: off, it turned the policy off whatever the
    # policy's own ``enabled`` says.
    switch: MasterSwitch
    # Options of the proxy given with --set that change nothing here (MCP
    # truncation's, recall's...): accepted, so that a proxy's command line
    # can be pasted, and named in the report.
    ignored: tuple[str, ...] = ()

    @property
    def line(self) -> str:
        """The proxy's start-up line for these settings."""
        return describe_policy(self.policy, self.source)


def policy_options() -> frozenset[str]:
    """The options that set the masking policy: its settings (``MaskPolicy``'s),
    the master switch, and the settings file and profile that hold them.
    Not the routes, which say which flows are conversations, not how one
    is masked."""
    names = {CONFIG_OPTION, PROFILE_OPTION, SWITCH_OPTION}
    names.update(item.option_name(SWITCH_PREFIX) for item in declared(MasterSwitch))
    names.update(item.option_name(PREFIX) for item in declared(MaskPolicy))
    return frozenset(names)


def route_options() -> frozenset[str]:
    """The options that say which flows are conversations, in which format
    (``obsmask_*_route``, ``obsmask_hosts``)."""
    return frozenset(item.option_name(PREFIX) for item in declared(Routes))


def used_options() -> frozenset[str]:
    """The options that change what conversation masking does to a request:
    the policy's (``policy_options``) and the routes. The others (MCP
    truncation, the gateway, recall, the totals) do not change the replay."""
    return policy_options() | route_options()


def option_names(specs: Sequence[str]) -> list[str]:
    """The names of ``--set NAME=VALUE`` specs, each once, in the order
    first given (a repeated option is one array, as in mitmproxy)."""
    return list(dict.fromkeys(spec.split("=", 1)[0] for spec in specs))


def _explicit_values(cls: type, prefix: str, options: ProxyOptions,
                     explicit: set[str]) -> dict[str, object]:
    """The typed values of ``cls``'s options given with ``--set``."""
    values: dict[str, object] = {}
    for item in declared(cls):
        name = item.option_name(prefix)
        if name not in explicit:
            continue
        try:
            values[item.key] = typed_value(item, options.setting_value(item, prefix))
        except SettingError as e:
            raise SettingsRefused(f"{name}: {e.message}") from None
    return values


def _built(cls: type[_Settings], values: dict[str, object], where: str) -> _Settings:
    try:
        return build(cls, values)
    except SettingError as e:  # a rule between two values, each fine alone
        raise SettingsRefused(f"{where}: {e}") from None


def settings_in_force(specs: Sequence[str], config: str | None = None,
                      profile: str | None = None) -> ProxySettings:
    """The settings the proxy would run with given ``--set`` ``specs`` and
    the ``--config``/``--profile`` shorthands (``--set obsmask_config=``,
    ``--set obsmask_profile=``); SettingsRefused says what is wrong."""
    from obsmask_core.mitm.file_tables import FILE_TABLES
    from obsmask_core.mitm.option_values import ProxyOptions, RefusedOption

    options = ProxyOptions()
    shorthands = [f"{CONFIG_OPTION}={config}"] if config is not None else []
    shorthands += [f"{PROFILE_OPTION}={profile}"] if profile is not None else []
    try:
        explicit = options.apply([*shorthands, *specs])
    except RefusedOption as e:
        raise SettingsRefused(str(e)) from None
    config_name = options.value(CONFIG_OPTION)
    profile_option = options.value(PROFILE_OPTION)
    chosen_profile = profile_option if isinstance(profile_option, str) else ""
    try:
        file = load_config(config_name if isinstance(config_name, str) else None, FILE_TABLES)
        file_switch = file.settings(MasterSwitch, SWITCH_SECTION)
        values = policy_values(file, chosen_profile)
    except ConfigError as e:
        raise SettingsRefused(str(e)) from None

    switch = _built(MasterSwitch, {**file_switch, **_explicit_values(
        MasterSwitch, SWITCH_PREFIX, options, explicit)}, f"[{'.'.join(SWITCH_SECTION)}]")
    values.update(_explicit_values(MaskPolicy, PREFIX, options, explicit))
    policy = _built(MaskPolicy, values,
                    f"[{'.'.join(POLICY_SECTION)}] ({file.source}, then {PREFIX}* options)")
    routes = _built(Routes, _explicit_values(Routes, PREFIX, options, explicit), "routes")

    if not switch.enabled:
        policy = build(MaskPolicy, {**values, "enabled": False})
        source = switch_origin(SWITCH_OPTION, SWITCH_OPTION in explicit, file, [SWITCH_SECTION])
    elif not policy.enabled:
        profile_table = [(*PROFILES_SECTION, chosen_profile)] if chosen_profile else []
        source = switch_origin(f"{PREFIX}enabled", f"{PREFIX}enabled" in explicit, file,
                               [*profile_table, POLICY_SECTION])
    else:
        given = sorted(explicit & used_options() - {CONFIG_OPTION, PROFILE_OPTION})
        source = file.source + (f", profile {chosen_profile}" if chosen_profile else "")
        source += f", --set {', '.join(given)}" if given else ""
    ignored = tuple(sorted(explicit - used_options()))
    return ProxySettings(policy, routes, source, file, chosen_profile, switch, ignored)
