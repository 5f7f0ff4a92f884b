"""The proxy's options for the offline commands (``obsmask measure`` and
``obsmask report``): registered by the proxy's own addons (their ``load``
run against a bare mitmproxy option manager), with ``--set NAME=VALUE``
parsed by mitmproxy's own code, so the names, types and value syntax are
the proxy's and nothing is listed twice."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import cast

from mitmproxy import exceptions, optmanager
from mitmproxy.addonmanager import Loader

from obsmask_core.mitm.addons import obsmask_addons
from obsmask_core.mitm.options import from_option
from obsmask_core.shared.settings import Setting


class RefusedOption(ValueError):
    """An unknown option (with the closest known one) or a wrong value."""


class _OptionRegistry:
    """What an addon's ``load`` uses of mitmproxy's Loader: ``add_option``
    and ``master.options`` (where pending ``--set`` values are checked)."""

    def __init__(self) -> None:
        self.options = optmanager.OptManager()
        self.master = self

    def add_option(self, name: str, typespec: type, default: object, help: str,
                   choices: Sequence[str] | None = None) -> None:
        self.options.add_option(name, typespec, default, help, choices)


class ProxyOptions:
    """Every option of obsmask, as the proxy registers them."""

    def __init__(self) -> None:
        registry = _OptionRegistry()
        for addon in obsmask_addons():
            load = getattr(addon, "load", None)
            if callable(load):
                load(cast(Loader, registry))
        self._options = registry.options

    def apply(self, specs: Sequence[str]) -> set[str]:
        """Parse ``--set NAME=VALUE`` specs as mitmproxy does (a repeated
        option is an array); the names set. RefusedOption names an unknown
        option (with the closest known one) or a wrong value."""
        # Each name once, in the order first given: a repeated one is an array.
        names = list(dict.fromkeys(spec.split("=", 1)[0] for spec in specs))
        for name in names:
            if name not in self._options:
                close = difflib.get_close_matches(name, sorted(self._options._options), n=1)
                hint = (f"did you mean {close[0]}?" if close else
                        "not an option of obsmask; they are in the README's settings tables")
                raise RefusedOption(f"unknown option {name} ({hint})")
            mine = [spec for spec in specs if spec.split("=", 1)[0] == name]
            try:
                self._options.set(*mine)
            except exceptions.OptionsError as e:
                values = ",".join(spec.partition("=")[2] for spec in mine)
                raise RefusedOption(f"--set {name}={values}: {e}") from None
        return set(names)

    def value(self, name: str) -> object:
        return getattr(self._options, name)

    def setting_value(self, item: Setting, prefix: str) -> object:
        """A setting's option value, as the setting reads it (its type and
        bounds not yet checked: ``shared.settings.typed_value``)."""
        return from_option(item, self.value(item.option_name(prefix)))
