"""Prices and cache rules per model, as data: the rows of
``model_prices.toml`` (shipped beside this module) and of the
``model_prices`` setting, and the row a request's ``model`` is billed
under.

A row names a family of models by shell-style patterns; the first row whose
pattern matches the request's ``model`` (case-insensitive) wins, the
user's rows before the shipped ones. A model no row of its provider matches
gets that provider's most cautious terms (``ModelTable.cautious``): the
lowest read price, the highest write prices and the smallest minimum of its
rows, under the cache rule of its newest models, so that a move the ledger
allows for it pays under any of them.
"""

from __future__ import annotations

import fnmatch
import math
import threading
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Literal, cast

from obsmask_core.conversation.billing.price_models import (
    OPENAI_CACHE_STEP,
    PRICE_UNIT,
    PriceModel,
)
from obsmask_core.shared.errors import SettingError

Provider = Literal["anthropic", "openai"]
CacheRule = Literal["anthropic_breakpoints", "openai_prefix_steps", "openai_prefix"]
PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai")
CACHE_RULES: tuple[CacheRule, ...] = ("anthropic_breakpoints", "openai_prefix_steps",
                                      "openai_prefix")
_PROVIDER_OF_RULE: Mapping[CacheRule, Provider] = MappingProxyType({
    "anthropic_breakpoints": "anthropic", "openai_prefix_steps": "openai",
    "openai_prefix": "openai"})
SHIPPED_TABLE = Path(__file__).with_name("model_prices.toml")
# The terms a row of the model_prices setting gives, and those it must.
_TERMS = ("provider", "read", "write", "write_1h", "minimum", "cache")
_REQUIRED_TERMS = ("read", "write", "minimum", "cache")
# Requests' model names remembered with their row (a bound on memory for a
# proxy that sees arbitrary names), and the characters of a name read.
MODELS_REMEMBERED = 4096
MODEL_CHARS = 200


@dataclass(frozen=True)
class ModelRow:
    """One family of models: its prices in thousandths of its base input
    price (``PRICE_UNIT``), its minimum cacheable prompt, its cache rule,
    and where the figures come from."""

    name: str
    patterns: tuple[str, ...]
    provider: Provider
    read: int
    write: int
    write_1h: int
    minimum: int
    cache: CacheRule
    source: str = ""
    checked: str = ""

    def matches(self, model: str) -> bool:
        lowered = model.lower()
        return any(fnmatch.fnmatchcase(lowered, pattern.lower()) for pattern in self.patterns)

    def price_model(self) -> PriceModel:
        """The row as the ledger prices it."""
        return PriceModel(self.name, self.read, self.write, self.minimum,
                          OPENAI_CACHE_STEP if self.cache == "openai_prefix_steps" else 1,
                          long_write=self.write_1h)

    def as_metadata(self) -> dict[str, object]:
        return {"name": self.name, "provider": self.provider, "cache": self.cache,
                "read": self.read / PRICE_UNIT, "write": self.write / PRICE_UNIT,
                "write_1h": self.write_1h / PRICE_UNIT, "minimum": self.minimum}


@dataclass(frozen=True)
class RowChoice:
    """The row a request's model is billed under; ``known`` is False when
    no row matched and the provider's cautious row stands in."""

    row: ModelRow
    model: str | None
    known: bool


def _multiple(where: str, key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0 or value > 100:
        raise SettingError(where, f"{key} must be a number from 0 to 100, got {value!r}")
    return round(value * PRICE_UNIT)


def row_from_terms(where: str, name: str, patterns: Sequence[str],
                   terms: Mapping[str, object]) -> ModelRow:
    """A row from its terms (as the TOML file or the setting writes them);
    SettingError naming ``where`` for a term that is missing or wrong."""
    unknown = sorted(set(terms) - {*_TERMS, "name", "models", "source", "checked"})
    if unknown:
        raise SettingError(where, f"unknown term {unknown[0]!r}; the terms are {', '.join(_TERMS)}")
    missing = [key for key in _REQUIRED_TERMS if key not in terms]
    if missing:
        raise SettingError(where, f"needs {', '.join(missing)}")
    cache = terms["cache"]
    if cache not in CACHE_RULES:
        raise SettingError(where, f"cache must be one of {', '.join(CACHE_RULES)}, got {cache!r}")
    rule = cast(CacheRule, cache)
    provider = terms.get("provider", _PROVIDER_OF_RULE[rule])
    if provider != _PROVIDER_OF_RULE[rule]:
        raise SettingError(where, f"cache {rule!r} is {_PROVIDER_OF_RULE[rule]}'s, "
                                  f"not {provider!r}'s")
    minimum = terms["minimum"]
    if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 0:
        raise SettingError(where, f"minimum must be a whole number of tokens, got {minimum!r}")
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise SettingError(where, "needs at least one model pattern")
    write = _multiple(where, "write", terms["write"])
    return ModelRow(
        name=name, patterns=tuple(patterns), provider=_PROVIDER_OF_RULE[rule],
        read=_multiple(where, "read", terms["read"]), write=write,
        write_1h=_multiple(where, "write_1h", terms.get("write_1h", write / PRICE_UNIT)),
        minimum=minimum, cache=rule, source=str(terms.get("source", "")),
        checked=str(terms.get("checked", "")))


def rows_from_toml(text: str, where: str) -> tuple[ModelRow, ...]:
    """The ``[[model]]`` rows of a model table file."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SettingError(where, f"is not TOML ({e})") from e
    rows = document.get("model")
    if not isinstance(rows, list):
        raise SettingError(where, "has no [[model]] rows")
    found = []
    for number, row in enumerate(rows, 1):
        place = f"{where} row {number}"
        if not isinstance(row, dict) or not isinstance(row.get("name"), str) \
                or not isinstance(row.get("models"), list):
            raise SettingError(place, "needs a name and a list of models")
        found.append(row_from_terms(place, row["name"], row["models"], row))
    return tuple(found)


def _number(text: str) -> int | float | str:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def parse_setting_row(pattern: str, terms: str,
                      shipped: Iterable[ModelRow]) -> ModelRow:
    """One pair of the ``model_prices`` setting: a model pattern and either
    the name of a shipped row (the model is billed like that family) or
    ``key=value`` terms (``cache=anthropic_breakpoints read=0.05 write=1.25
    write_1h=2 minimum=512``)."""
    where = f"model_prices {pattern!r}"
    words = terms.split()
    if len(words) == 1 and "=" not in words[0]:
        for row in shipped:
            if row.name == words[0]:
                return ModelRow(pattern, (pattern,), row.provider, row.read, row.write,
                                row.write_1h, row.minimum, row.cache,
                                f"as {row.name}", row.checked)
        names = ", ".join(row.name for row in shipped)
        raise SettingError(where, f"no shipped row {words[0]!r}; the rows are {names}")
    values: dict[str, object] = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals or not value:
            raise SettingError(where, f"{word!r} is not key=value")
        values[key] = _number(value)
    return row_from_terms(where, pattern, (pattern,), values)


def cautious_row(provider: Provider, rows: Iterable[ModelRow]) -> ModelRow:
    """The terms no row of ``provider`` is less favourable to masking than:
    its lowest read, highest writes and smallest minimum, under the cache
    rule of its newest models (for OpenAI, billed writes)."""
    own = [row for row in rows if row.provider == provider]
    if not own:
        raise ValueError(f"no {provider} row")
    rule: CacheRule = "anthropic_breakpoints" if provider == "anthropic" else "openai_prefix"
    return ModelRow(
        name=f"{provider}-unknown", patterns=(), provider=provider,
        read=min(row.read for row in own), write=max(row.write for row in own),
        write_1h=max(row.write_1h for row in own), minimum=min(row.minimum for row in own),
        cache=rule, source=f"the most cautious terms of the {provider} rows")


class ModelTable:
    """The rows, the user's first, with a lookup that remembers each
    request's model name (bounded)."""

    def __init__(self, rows: Sequence[ModelRow]) -> None:
        self.rows = tuple(rows)
        self._cautious = {provider: cautious_row(provider, self.rows) for provider in PROVIDERS}
        self._chosen: dict[tuple[Provider, str], RowChoice] = {}
        self._lock = threading.Lock()

    @classmethod
    def shipped(cls) -> ModelTable:
        return cls(shipped_rows())

    def cautious(self, provider: Provider) -> ModelRow:
        return self._cautious[provider]

    def terms_of(self, provider: Provider) -> tuple[tuple[PriceModel, CacheRule], ...]:
        """The distinct terms of ``provider``'s rows, as the ledger prices
        them (named after the first row with those terms)."""
        found: dict[tuple[int, int, int, int, CacheRule], tuple[PriceModel, CacheRule]] = {}
        for row in self.rows:
            key = (row.read, row.write, row.write_1h, row.minimum, row.cache)
            if row.provider == provider and key not in found:
                found[key] = (replace(row.price_model(), name=f"as {row.name}"), row.cache)
        return tuple(found.values())

    def choose(self, provider: Provider, model: object) -> RowChoice:
        """The row of the request's ``model`` among ``provider``'s."""
        if not isinstance(model, str) or not model:
            return RowChoice(self._cautious[provider], None, False)
        # A name is a few dozen characters: a longer one is cut, and what
        # cannot be printed is replaced, before it is matched, kept or logged.
        model = "".join(char if char.isprintable() else "?" for char in model[:MODEL_CHARS])
        key = (provider, model)
        found = self._chosen.get(key)
        if found is None:
            row = next((row for row in self.rows
                        if row.provider == provider and row.matches(model)), None)
            found = RowChoice(row, model, True) if row is not None \
                else RowChoice(self._cautious[provider], model, False)
            with self._lock:
                if len(self._chosen) >= MODELS_REMEMBERED:
                    self._chosen.clear()
                self._chosen[key] = found
        return found


def shipped_rows() -> tuple[ModelRow, ...]:
    """The rows of the table shipped with the package."""
    return rows_from_toml(SHIPPED_TABLE.read_text(encoding="utf-8"), SHIPPED_TABLE.name)
