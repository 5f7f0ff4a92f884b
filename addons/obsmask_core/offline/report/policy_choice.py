"""The masking policy the report replays each conversation under, and the
words that say where it comes from.

The settings are read by ``obsmask_core.offline.proxy_settings``, the reader measure.py
uses, as the proxy reads them: the built-in defaults, then the settings file
(``--config``, or ``--set obsmask_config=PATH``, or else ``mitm.toml`` in the
current directory when there is one) with its profile (``obsmask_profile``),
then the ``--set obsmask_<key>=VALUE`` options, with the proxy's option
names, value syntax and checks; a wrong one stops the report with that
reader's one line.

When the user gives no setting of the masking policy (neither ``--config``
nor a ``--set`` of the policy's options, the master switch or the profile:
``obsmask_core.offline.proxy_settings.policy_options``), the values a conversation's
flows recorded go over the file's: ``window_turns``, ``min_chars`` and
``payback_factor`` of its masked requests,
the ``price_model`` and ``allowance_percent`` of the bill obsmask kept (each
read with ``obsmask_core.shared.read_back``: a flow file may hold anything).
The replay then follows what the proxy did, and the page names those keys.
A ``--set`` of a route (``obsmask_chat_route``...) or of another feature
changes no policy, so the recorded values are still followed. With policy
settings given, the user's win, and the page lists the recorded values they
contradict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from obsmask_core.conversation.billing.price_models import AUTO, PRICE_MODEL_NAMES
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.settings.routes import Routes
from obsmask_core.offline.errors import OfflineError
from obsmask_core.offline.proxy_settings import (
    PREFIX,
    ProxySettings,
    option_names,
    policy_options,
    route_options,
    settings_in_force,
)
from obsmask_core.shared.config_file import DEFAULT_CONFIG_NAME
from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.read_back import mapping, whole, word
from obsmask_core.shared.request_record import Action, BillKey, Key
from obsmask_core.shared.settings import build, declared

# What a conversation's flows record of the policy, and where.
RECORDED_KEYS = ("window_turns", "min_chars", "payback_factor", "price_model",
                 "allowance_percent")


@dataclass(frozen=True)
class UserSettings:
    """``--config`` and the ``--set NAME=VALUE`` options, as the command line
    gave them: whether they set the masking policy decides whether the
    recorded values are followed, so they are kept as given, not only as read."""

    config: str | None = None
    assignments: tuple[str, ...] = ()

    @property
    def given(self) -> bool:
        """Is any setting of the masking policy given (``--config``, or a
        ``--set`` of the policy, the master switch, the file or the profile)?
        A route or another feature's option is not one."""
        return self.config is not None or any(
            name in policy_options() for name in option_names(self.assignments))


def recorded_settings(masking: Iterable[Mapping[str, object]]) -> dict[str, object]:
    """The policy values a conversation's flows recorded (the last request
    that says each wins): ``window_turns``, ``min_chars`` and
    ``payback_factor`` of a masked request, the price
    model and allowance of the bill obsmask kept ("none" for a masked
    request without a bill; "auto" for a bill priced by a row of the
    model table)."""
    found: dict[str, object] = {}
    for summary in masking:
        masked = word(summary.get(Key.ACTION)) == Action.MASKED
        for key in (Key.WINDOW_TURNS, Key.MIN_CHARS, Key.PAYBACK_FACTOR):
            value = whole(summary.get(key))
            if masked and value is not None:
                found[key] = value
        bill = mapping(summary.get(Key.BILL))
        if masked and not bill:
            # A masked request was planned: without a bill, its price model
            # had no cache (conversation/masking/summary.py keeps the bill otherwise).
            found["price_model"] = "none"
            found.pop("allowance_percent", None)
        price_model, allowance = (word(bill.get(BillKey.PRICE_MODEL)),
                                whole(bill.get(BillKey.ALLOWANCE_PERCENT)))
        if price_model is not None:
            # Under "auto" the bill names its model's row, which the
            # replay finds again from the request's model.
            found["price_model"] = price_model if price_model in PRICE_MODEL_NAMES else AUTO
        if allowance is not None:
            found["allowance_percent"] = allowance
    return found


@dataclass(frozen=True)
class ReplayPolicy:
    policy: MaskPolicy
    source: str  # where its values come from, for the page
    # Recorded values this policy does not follow ("window_turns: 2 in the
    # flows, 1 here"): the replay is then not what the proxy did.
    differences: tuple[str, ...] = ()


def _file_source(in_force: ProxySettings) -> str:
    """Where the values under the recorded ones and the options come from."""
    if in_force.config.path is None:
        return f"the built-in defaults (no {DEFAULT_CONFIG_NAME} in the current directory)"
    return (f"{in_force.config.source} [observation_masking.schema1]"
            + (f", profile {in_force.profile}" if in_force.profile else ""))


def _with_values(policy: MaskPolicy, values: Mapping[str, object]) -> MaskPolicy:
    """``policy`` with ``values`` over its own, each checked as the proxy
    checks a value of the settings file (SettingError names a wrong one)."""
    own: dict[str, object] = {item.key: getattr(policy, item.key)
                              for item in declared(MaskPolicy)}
    return build(MaskPolicy, {**own, **values})


class PolicyChooser:
    """The user's settings, read once (a wrong one is a OfflineError before any
    replay); the policy of each conversation."""

    def __init__(self, settings: UserSettings) -> None:
        self.settings = settings
        self.in_force = settings_in_force(settings.assignments, settings.config)
        self.ignored = self.in_force.ignored
        given = set(option_names(settings.assignments))
        # The policy's options given with --set, in the order it declares them.
        self._set_policy_options = tuple(
            name for name in (item.option_name(PREFIX) for item in declared(MaskPolicy))
            if name in given)
        self._file_source = _file_source(self.in_force)

    def source_statement(self) -> str:
        """Which settings the replay follows, for the top of the page."""
        if self.settings.given:
            given = ([f"--config {self.settings.config}"] if self.settings.config else []) + [
                f"--set {name}" for name in option_names(self.settings.assignments)
                if name not in self.ignored]
            text = (f"the user's settings ({', '.join(given)}) over {self._file_source}; "
                    "the values the flows recorded are not followed, and each conversation "
                    "lists those its replay contradicts")
        else:
            text = (f"{self._file_source}, with each conversation's recorded "
                    f"{', '.join(RECORDED_KEYS)} over it (from its flows' metadata, when "
                    "obsmask recorded them), as each conversation states")
            routes = [name for name in option_names(self.settings.assignments)
                      if name in route_options()]
            if routes:
                text += ("; the conversations are the requests on the routes of --set "
                         + ", ".join(routes))
        if self.ignored:
            text += ("; these options change no replayed request and are ignored: "
                     + ", ".join(self.ignored))
        return text

    def routes(self) -> Routes:
        """Which requests are conversations (``--set obsmask_*_route``)."""
        return self.in_force.routes

    def for_conversation(self, recorded: Mapping[str, object]) -> ReplayPolicy:
        """The policy to replay a conversation whose flows recorded ``recorded``."""
        policy = self.in_force.policy
        parts = [self._file_source]
        followed: dict[str, object] = {}
        if not self.settings.given:
            # Nothing given: the policy in force is the file's (or the
            # built-in defaults it leaves in place), and the recorded values
            # that differ go over it, checked as the policy checks a value.
            followed = {key: value for key, value in recorded.items()
                        if key in RECORDED_KEYS and getattr(policy, key) != value}
            try:
                policy = _with_values(policy, followed)
            except SettingError as e:
                where = "the flows' metadata" if e.key in followed else "--set or the file"
                raise OfflineError(f"{PREFIX}{e.key} ({where}): {e.message}") from e
        if followed:
            parts.append("with " + ", ".join(f"{key} = {value!r}"
                                              for key, value in followed.items())
                         + " as the flows recorded")
        if self._set_policy_options:
            parts.append("--set " + ", ".join(self._set_policy_options))
        if not self.in_force.switch.enabled:
            parts.append("masking switched off ([obsmask] enabled / obsmask_all_enabled)")
        differences = tuple(
            f"{key}: {value!r} in the flows, {getattr(policy, key)!r} in this replay"
            for key, value in recorded.items()
            if key in RECORDED_KEYS and getattr(policy, key) != value
        )
        return ReplayPolicy(policy, "; ".join(parts), differences)
