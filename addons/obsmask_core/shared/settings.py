"""Settings declared once: a frozen dataclass whose fields say everything.

A feature's settings are one dataclass; each field is made with ``setting()``
and carries its default, its help text, its lower bound and an extra check.
Everything else is derived from that declaration: the check of a TOML table
(``values_from_table``), the typed value (the dataclass checks itself when it
is built, so a wrong value is an error, never a silent fallback), the
mitmproxy options and their help (``obsmask_core.mitm.options``) and the
table of docs/configuration.md. Adding a setting is adding one field.

The kinds a setting may have are the ones TOML and mitmproxy options can both
say: ``bool``, ``int``, ``str``, ``tuple[str, ...]`` (an array of strings; a
repeated option) and ``tuple[tuple[str, str], ...]`` (an array of pairs; a
repeated ``FIRST|SECOND`` option).
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, TypeVar

from obsmask_core.shared.errors import SettingError

Kind = Literal["bool", "int", "str", "strings", "pairs"]
PAIR_SEPARATOR = "|"
_KINDS: Mapping[object, Kind] = MappingProxyType({
    bool: "bool",
    int: "int",
    str: "str",
    tuple[str, ...]: "strings",
    tuple[tuple[str, str], ...]: "pairs",
})
_METADATA_KEY = "obsmask_setting"
_T = TypeVar("_T")


@dataclass(frozen=True)
class SettingInfo:
    """What a field's declaration says besides its default.

    ``check`` raises SettingError for a value of the right kind that is still
    wrong (a template with an unknown field). ``in_file``: the key may be
    written in mitm.toml (routes and stream switches are options only).
    ``option``: the option's name after its prefix, when it is not the key.
    """

    help: str
    minimum: int | None = None
    maximum: int | None = None
    check: Callable[[str, object], None] | None = None
    in_file: bool = True
    option: str | None = None


def setting(
    default: _T,
    help: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    check: Callable[[str, object], None] | None = None,
    in_file: bool = True,
    option: str | None = None,
) -> _T:
    """A dataclass field that is a setting (see the module's docstring)."""
    info = SettingInfo(" ".join(help.split()), minimum, maximum, check, in_file, option)
    declared_field: _T = dataclasses.field(default=default, metadata={_METADATA_KEY: info})
    return declared_field


@dataclass(frozen=True)
class Setting:
    """One declared setting, as the derived code reads it."""

    key: str
    kind: Kind
    default: object
    info: SettingInfo

    def option_name(self, prefix: str) -> str:
        return prefix + (self.info.option or self.key)


def declared(cls: type) -> list[Setting]:
    """The settings of a settings dataclass, in declaration order."""
    hints = typing.get_type_hints(cls)
    found = []
    for item in dataclasses.fields(cls):
        info = item.metadata.get(_METADATA_KEY)
        if not isinstance(info, SettingInfo):
            continue
        kind = _KINDS.get(hints[item.name])
        if kind is None:
            raise TypeError(f"{cls.__name__}.{item.name}: no setting kind for {hints[item.name]}")
        found.append(Setting(item.name, kind, item.default, info))
    return found


def _type_word(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


def typed_value(item: Setting, value: object) -> object:
    """``value`` (as TOML or a check gives it: lists for arrays) in the field's
    own type; raises SettingError naming the key when it is not acceptable."""
    key = item.key
    if item.kind in ("bool", "int", "str"):
        wanted = {"bool": bool, "int": int, "str": str}[item.kind]
        # bool is a subclass of int: ``window_turns = true`` must not pass as 1.
        if not isinstance(value, wanted) or (wanted is int and isinstance(value, bool)):
            raise SettingError(
                key, f"must be {_type_word(wanted())}, got {_type_word(value)} {value!r}"
            )
        if isinstance(value, int) and not isinstance(value, bool):
            lowest = item.info.minimum
            if lowest is not None and value < lowest:
                raise SettingError(key, f"must be {lowest} or more, got {value}")
            highest = item.info.maximum
            if highest is not None and value > highest:
                raise SettingError(key, f"must be {highest} or less, got {value}")
    elif item.kind == "strings":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise SettingError(key, f"must be an array of strings, got {value!r}")
        value = tuple(value)
    else:
        pairs = _pairs(value)
        if pairs is None:
            raise SettingError(
                key, f"must be an array of [begin, end] pairs of non-empty strings, got {value!r}"
            )
        value = pairs
    if item.info.check is not None:
        item.info.check(key, value)
    return value


def _pairs(value: object) -> tuple[tuple[str, str], ...] | None:
    if not isinstance(value, (list, tuple)):
        return None
    pairs = []
    for pair in value:
        if (
            not isinstance(pair, (list, tuple))
            or len(pair) != 2
            or not all(isinstance(marker, str) and marker for marker in pair)
        ):
            return None
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def check_fields(instance: object) -> None:
    """Check every setting of a settings dataclass instance (its __post_init__
    calls this): a wrong value raises SettingError naming the key."""
    for item in declared(type(instance)):
        typed_value(item, getattr(instance, item.key))


def find(cls: type, key: str, *, in_file: bool = True) -> Setting:
    """The setting ``key`` of ``cls`` (with ``in_file``, only one that the
    settings file may hold); SettingError naming the closest key if none,
    else listing the keys."""
    candidates = [item for item in declared(cls) if item.info.in_file or not in_file]
    for item in candidates:
        if item.key == key:
            return item
    close = closest(key, [item.key for item in candidates])
    if close:
        raise SettingError(key, f"unknown key (did you mean {' or '.join(close)}?)")
    known = ", ".join(item.key for item in candidates)
    raise SettingError(key, f"unknown key; the keys are {known}")


def closest(name: str, candidates: Sequence[str]) -> list[str]:
    """The candidates nearest ``name`` as difflib measures it (a ratio of
    0.6 at least, as ``get_close_matches``), every one of them on a tie:
    ``nxclude`` is as near ``include`` as ``exclude``."""
    ratios = {candidate: difflib.SequenceMatcher(None, name, candidate).ratio()
              for candidate in candidates}
    best = max(ratios.values(), default=0.0)
    return [candidate for candidate, ratio in ratios.items() if ratio == best >= 0.6]


def check_value(cls: type, key: str, value: object) -> object:
    """One key of a settings table: its typed value, or SettingError."""
    return typed_value(find(cls, key), value)


def values_from_table(cls: type, table: Mapping[str, object]) -> dict[str, object]:
    """The typed values of a settings table for ``cls``, key by key."""
    return {key: check_value(cls, key, value) for key, value in table.items()}


def build(cls: type[_T], values: Mapping[str, object]) -> _T:
    """``cls`` with ``values`` (typed, or as TOML gives them) over its
    defaults; SettingError naming the key of a wrong value."""
    typed = {key: typed_value(find(cls, key, in_file=False), value)
             for key, value in values.items()}
    return cls(**typed)
