"""mitmproxy options derived from the settings classes, and the three private
corners of mitmproxy's option manager that obsmask relies on.

Each setting of a settings class (``obsmask_core.shared.settings``) becomes
one option ``<prefix><key>`` with the setting's default and help; arrays
become repeatable options (``--set obsmask_exclude_tools=a --set
obsmask_exclude_tools=b``), pairs ``FIRST|SECOND`` strings. Tested on
mitmproxy 11 and 12.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import NoReturn, TypeVar, cast

from mitmproxy import ctx, exceptions, optmanager
from mitmproxy.addonmanager import Loader

from obsmask_core.shared.config_file import ConfigFile
from obsmask_core.shared.errors import ConfigError, SettingError
from obsmask_core.shared.settings import (
    PAIR_SEPARATOR,
    Kind,
    Setting,
    build,
    declared,
    typed_value,
)

logger = logging.getLogger(__name__)
_Settings = TypeVar("_Settings")

# mitmproxy takes typing forms such as Sequence[str] as option types, though
# its signature says ``type``.
_TYPESPECS: Mapping[Kind, type] = MappingProxyType({
    "bool": bool,
    "int": int,
    "str": str,
    "strings": cast(type, Sequence[str]),
    "pairs": cast(type, Sequence[str]),
})


def _as_option(item: Setting, value: object) -> object:
    """A setting's value as its option holds it."""
    if item.kind == "strings" and isinstance(value, tuple):
        return list(value)
    if item.kind == "pairs" and isinstance(value, tuple):
        return [PAIR_SEPARATOR.join(pair) for pair in value]
    return value


def from_option(item: Setting, value: object) -> object:
    """An option's value in the form the setting's check takes."""
    if item.kind == "pairs" and isinstance(value, (list, tuple)):
        return [str(pair).split(PAIR_SEPARATOR, 1) for pair in value]
    if isinstance(value, tuple):
        return list(value)
    return value


def add_options(loader: Loader, cls: type, prefix: str) -> list[str]:
    """Register one option per setting of ``cls``; the names registered."""
    names = []
    for item in declared(cls):
        name = item.option_name(prefix)
        loader.add_option(name, _TYPESPECS[item.kind], _as_option(item, item.default),
                          item.info.help)
        names.append(name)
    check_pending_values(loader.master.options, names)
    return names


def option_values(cls: type, prefix: str, *, only_set: bool) -> dict[str, object]:
    """The typed values of ``cls``'s options (with ``only_set``, only those
    given a value: ``--set``, config.yaml, the UI); OptionsError naming the
    option of a wrong one."""
    values: dict[str, object] = {}
    for item in declared(cls):
        name = item.option_name(prefix)
        if only_set and not set_explicitly(name):
            continue
        try:
            values[item.key] = typed_value(item, from_option(item, getattr(ctx.options, name)))
        except SettingError as e:
            refuse(f"obsmask: {name}: {e.message}")
    return values


def settings_in_force(
    cls: type[_Settings], prefix: str, file: ConfigFile, section: tuple[str, ...],
    file_values: Callable[[], dict[str, object]],
) -> _Settings:
    """``cls`` as the user set it: its defaults, then the settings file's
    values (``file_values``), then the options set explicitly. OptionsError
    names the file, the option or the section of a wrong value."""
    try:
        values = file_values()
    except ConfigError as e:
        refuse(f"obsmask: {e}")
    from_file = dict(values)
    values.update(option_values(cls, prefix, only_set=True))
    try:
        settings = build(cls, values)
    except SettingError as e:  # a rule between two values, each fine alone
        refuse(f"obsmask: [{'.'.join(section)}] ({file.source}, then {prefix}* options): {e}")
    show_file_values_as_defaults(cls, prefix, from_file)
    return settings


def show_file_values_as_defaults(cls: type, prefix: str, from_file: dict[str, object]) -> None:
    """Make the settings file's values the options' defaults, so that
    mitmweb's options editor (``GET /options``) and ``--options`` show the
    values in force, not the built-in ones. An option given a value
    (``--set``, the UI) keeps it: only the default moves, and "reset"
    returns to the file's value. A private corner of mitmproxy's option
    manager: ``_Option`` keeps its default in ``_default``."""
    for item in declared(cls):
        option = ctx.options._options.get(item.option_name(prefix))
        value = from_file.get(item.key, item.default)
        if option is None or (item.kind == "pairs" and _separator_inside(value)):
            # A pair whose half holds "|" could not be read back from the
            # option's text: that default stays the built-in one.
            continue
        option._default = _as_option(item, value)


def _separator_inside(pairs: object) -> bool:
    return isinstance(pairs, (list, tuple)) and any(
        PAIR_SEPARATOR in str(half) for pair in pairs
        if isinstance(pair, (list, tuple)) for half in pair)


def set_explicitly(name: str) -> bool:
    """Was option ``name`` given a value (``--set``, config.yaml, the UI)?

    mitmproxy keeps an option at ``unset`` until something sets it. Comparing
    with the default instead would let mitm.toml win over ``--set x=<default>``,
    and the precedence is defaults < mitm.toml < options.
    """
    option = ctx.options._options.get(name)
    return option is not None and option.value is not optmanager.unset


def check_pending_values(options: optmanager.OptManager, names: Iterable[str]) -> None:
    """Check the ``--set`` values waiting for these options, before mitmproxy does.

    mitmproxy converts ``--set name=value`` for a script's option only when the
    script registers it, and a conversion error there goes unreported: the
    proxy would run without obsmask after ``--set obsmask_window_turns=ten``.
    An error logged here stops mitmdump at start-up instead, with one line.
    """
    for name in names:
        if name not in options.deferred or name not in options:
            continue
        raw = getattr(options.deferred[name], "val", None)
        if not isinstance(raw, list):
            continue
        try:
            options._parse_setval(options._options[name], raw)
        except exceptions.OptionsError as e:
            message = f"obsmask: --set {name}={','.join(raw)}: {e}"
            if starting_up():
                refuse(message)
            logger.error("%s", message)
            del options.deferred[name]


OUR_PREFIXES = ("obsmask_", "mcpmask_")


def check_unknown_options(options: optmanager.OptManager) -> None:
    """Refuse a ``--set`` (or config.yaml) value for an ``obsmask_*`` or
    ``mcpmask_*`` option that no addon registered: mitmproxy keeps it in
    ``options.deferred`` for a script that may come later, and would run
    with the default in silence. Call it once every addon has loaded."""
    ours = sorted(name for name in options.keys() if name.startswith(OUR_PREFIXES))
    for name in sorted(options.deferred):
        if not name.startswith(OUR_PREFIXES):
            continue
        close = difflib.get_close_matches(name, ours, n=1)
        hint = (f"did you mean {close[0]}?" if close
                else "the options are in docs/configuration.md")
        refuse(f"obsmask: unknown option {name} ({hint})")


def starting_up() -> bool:
    """Is mitmproxy starting, its errorcheck addon still watching the log?

    mitmdump, mitmweb and mitmproxy end start-up on an error logged before
    the errorcheck finishes; a test context has no errorcheck."""
    check = ctx.master.addons.get("errorcheck")
    return check is not None and getattr(check, "logger", None) in logging.getLogger().handlers


def refuse(message: str) -> NoReturn:
    """Refuse a setting with ``message`` (one line).

    At start-up: log it and exit with code 1 at once. mitmproxy (11 and 12
    alike) loads a script in a task that runs after its first start-up check:
    an OptionsError raised in the script's configure is logged with a
    traceback, the proxy then listens, and only then does the errorcheck see
    the error and exit. Exiting here is the exit the errorcheck makes, before
    the proxy listens. Later (mitmweb's options editor, a reload): an
    OptionsError, which refuses the value and keeps the proxy running."""
    if starting_up():
        logger.error("%s", message)
        raise SystemExit(1)
    raise exceptions.OptionsError(message)
