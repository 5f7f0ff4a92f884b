"""The masking policy the report replays each conversation under, and the
words that say where it comes from.

As the proxy reads its settings: the built-in defaults, then the settings
file (``--config``, or ``--set obsmask_config=PATH``, or else ``mitm.toml``
in the current directory when there is one) with its profile
(``obsmask_profile``), then the ``--set obsmask_<key>=VALUE`` options
(repeated for an array; ``BEGIN|END`` for a pair), checked by the settings
classes themselves.

When the user gives neither ``--config`` nor ``--set``, the values a
conversation's flows recorded go over the file's: ``window_turns`` of its
masked requests, the ``price_model`` and ``allowance_percent`` of the bill
obsmask kept. The replay then follows what the proxy did, and the page names
those keys. With settings given, the user's win, and the page lists the
recorded values they contradict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from benchlib.errors import BenchError
from obsmask_core.conversation.policy import MaskPolicy, policy_values
from obsmask_core.conversation.routes import Routes
from obsmask_core.shared.config_file import DEFAULT_CONFIG_NAME, ConfigFile, load_config
from obsmask_core.shared.errors import ConfigError, SettingError
from obsmask_core.shared.settings import PAIR_SEPARATOR, Setting, build, declared

PREFIX = "obsmask_"
CONFIG_OPTION = "obsmask_config"
PROFILE_OPTION = "obsmask_profile"
SWITCH_OPTION = "obsmask_all_enabled"
SWITCH_SECTION = ("obsmask",)
# Every obsmask option starts so. A proxy command line may carry those of
# obsmask's other parts (MCP truncation, the gateway, recall, totals): they
# change no replayed request, and the page lists them as ignored.
OUR_PREFIXES = (PREFIX, "mcpmask_")
# What a conversation's flows record of the policy, and where.
RECORDED_KEYS = ("window_turns", "price_model", "allowance_percent")


def _settings_by_option(cls: type) -> dict[str, Setting]:
    return {item.option_name(PREFIX): item for item in declared(cls)}


POLICY_OPTIONS = _settings_by_option(MaskPolicy)
ROUTE_OPTIONS = _settings_by_option(Routes)


def _true_or_false(name: str, text: str) -> bool:
    """mitmproxy's words for a boolean option."""
    if text.lower() in ("", "true"):
        return True
    if text.lower() == "false":
        return False
    raise BenchError(f"--set {name}={text}: must be true or false")


def _option_value(name: str, item: Setting, texts: Sequence[str]) -> object:
    """An option's --set texts as its setting's check takes them."""
    if item.kind == "strings":
        return list(texts)
    if item.kind == "pairs":
        return [text.split(PAIR_SEPARATOR, 1) for text in texts]
    text = texts[-1]  # the last of repeated values wins, as in mitmproxy
    if item.kind == "bool":
        return _true_or_false(name, text)
    if item.kind == "int":
        try:
            return int(text)
        except ValueError:
            raise BenchError(f"--set {name}={text}: must be an integer") from None
    return text


@dataclass(frozen=True)
class UserSettings:
    """``--config`` and the ``--set`` options, by option name."""

    config: str | None = None
    options: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @property
    def given(self) -> bool:
        return self.config is not None or bool(self.options)


def parse_set_options(config: str | None, assignments: Iterable[str]) -> UserSettings:
    """``--set NAME=VALUE`` options, each repeated name kept in order;
    BenchError for one that is not ``NAME=VALUE`` or not obsmask's."""
    options: dict[str, list[str]] = {}
    for assignment in assignments:
        name, equals, value = assignment.partition("=")
        name = name.strip()
        if not equals or not name:
            raise BenchError(f"--set {assignment!r}: expected NAME=VALUE")
        if not name.startswith(OUR_PREFIXES):
            raise BenchError(f"--set {name}: not an obsmask option (obsmask_*, mcpmask_*)")
        options.setdefault(name, []).append(value)
    return UserSettings(config, options)


def recorded_settings(masking: Iterable[Mapping[str, object]]) -> dict[str, object]:
    """The policy values a conversation's flows recorded (the last request
    that says each wins): ``window_turns`` of a masked request, the price
    model and allowance of the bill obsmask kept ("none" for a masked
    request without a bill)."""
    found: dict[str, object] = {}
    for summary in masking:
        masked = summary.get("action") == "masked"
        if masked and isinstance(summary.get("window_turns"), int):
            found["window_turns"] = summary["window_turns"]
        bill = summary.get("bill")
        if masked and bill is None:
            # A masked request was planned: without a bill, its price model
            # had no cache (conversation/summary.py keeps the bill otherwise).
            found["price_model"] = "none"
            found.pop("allowance_percent", None)
        if isinstance(bill, dict):
            for key in ("price_model", "allowance_percent"):
                if key in bill:
                    found[key] = bill[key]
    return found


@dataclass(frozen=True)
class ReplayPolicy:
    policy: MaskPolicy
    source: str  # where its values come from, for the page
    # Recorded values this policy does not follow ("window_turns: 2 in the
    # flows, 1 here"): the replay is then not what the proxy did.
    differences: tuple[str, ...] = ()


class PolicyChooser:
    """The user's settings, read once; the policy of each conversation."""

    def __init__(self, settings: UserSettings) -> None:
        self.settings = settings
        options = settings.options
        config_path = settings.config
        if CONFIG_OPTION in options:
            config_path = options[CONFIG_OPTION][-1] or None
        profile = options[PROFILE_OPTION][-1] if PROFILE_OPTION in options else ""
        try:
            self.config: ConfigFile = load_config(config_path)
            self._file_values = policy_values(self.config, profile)
            switch = self.config.table(SWITCH_SECTION).get("enabled", True)
        except ConfigError as e:
            raise BenchError(str(e)) from e
        if SWITCH_OPTION in options:
            switch = _true_or_false(SWITCH_OPTION, options[SWITCH_OPTION][-1])
        self._switched_off = switch is False
        self._set_values = {item.key: _option_value(name, item, options[name])
                            for name, item in POLICY_OPTIONS.items() if name in options}
        self._route_values = {item.key: _option_value(name, item, options[name])
                              for name, item in ROUTE_OPTIONS.items() if name in options}
        known = {*POLICY_OPTIONS, *ROUTE_OPTIONS, CONFIG_OPTION, PROFILE_OPTION, SWITCH_OPTION}
        self.ignored = tuple(sorted(name for name in options if name not in known))
        self._file_source = (
            f"{self.config.source} [observation_masking.schema1]"
            + (f", profile {profile}" if profile else "")
            if self.config.path is not None
            else f"the built-in defaults (no {DEFAULT_CONFIG_NAME} in the current directory)"
        )
        self.for_conversation({})  # a wrong value is an error before any replay

    def source_statement(self) -> str:
        """Which settings the replay follows, for the top of the page."""
        if self.settings.given:
            given = ([f"--config {self.settings.config}"] if self.settings.config else []) + [
                f"--set {name}" for name in self.settings.options if name not in self.ignored]
            text = (f"the user's settings ({', '.join(given)}) over {self._file_source}; "
                    "the values the flows recorded are not followed, and each conversation "
                    "lists those its replay contradicts")
        else:
            text = (f"{self._file_source}, with each conversation's recorded "
                    f"{', '.join(RECORDED_KEYS)} over it (from its flows' metadata, when "
                    "obsmask recorded them), as each conversation states")
        if self.ignored:
            text += ("; these options change no replayed request and are ignored: "
                     + ", ".join(self.ignored))
        return text

    def routes(self) -> Routes:
        """Which requests are conversations (``--set obsmask_*_route``)."""
        try:
            return build(Routes, self._route_values)
        except SettingError as e:
            raise BenchError(f"--set {PREFIX}{e.key}: {e.message}") from e

    def for_conversation(self, recorded: Mapping[str, object]) -> ReplayPolicy:
        """The policy to replay a conversation whose flows recorded ``recorded``."""
        values = dict(self._file_values)
        parts = [self._file_source]
        followed: dict[str, object] = {}
        if not self.settings.given:
            # The file's value, or the built-in default the file leaves in place.
            in_force = {item.key: values.get(item.key, item.default)
                        for item in POLICY_OPTIONS.values()}
            followed = {key: value for key, value in recorded.items()
                        if key in RECORDED_KEYS and in_force[key] != value}
            values.update(followed)
        values.update(self._set_values)
        if self._switched_off:
            values["enabled"] = False
        try:
            policy = build(MaskPolicy, values)
        except SettingError as e:
            where = "the flows' metadata" if e.key in followed else "--set or the file"
            raise BenchError(f"{PREFIX}{e.key} ({where}): {e.message}") from e
        if followed:
            parts.append("with " + ", ".join(f"{key} = {value!r}"
                                              for key, value in followed.items())
                         + " as the flows recorded")
        if self._set_values:
            parts.append("--set " + ", ".join(f"{PREFIX}{key}" for key in self._set_values))
        if self._switched_off:
            parts.append("masking switched off ([obsmask] enabled / obsmask_all_enabled)")
        differences = tuple(
            f"{key}: {value!r} in the flows, {getattr(policy, key)!r} in this replay"
            for key, value in recorded.items()
            if key in RECORDED_KEYS and getattr(policy, key) != value
        )
        return ReplayPolicy(policy, "; ".join(parts), differences)
