"""The tables the settings file may hold, and the check that it holds no
other name: a misspelt table or key would otherwise be read as absent, and
obsmask would run on defaults while saying it read the file.

Each table obsmask reads is a ``FileTable``: where it is and what its keys
are, taken from a settings class (``shared/settings.py``), so that a key is
declared once. ``mitm/file_tables.py`` lists the tables of every feature.
Each problem names the line (``toml_lines``) and the closest known name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.settings import check_value, closest, declared
from obsmask_core.shared.toml_lines import Names


@dataclass(frozen=True)
class FileTable:
    """A table of the settings file that obsmask reads.

    ``settings``: the class whose in-file settings are its keys. ``named``:
    its tables have names of the user's choosing (profiles), and each holds
    those keys. ``entry``: its keys have names of the user's choosing (the
    gateway's servers), and each value is checked by it (SettingError)."""

    names: Names
    settings: type | None = None
    named: bool = False
    entry: Callable[[str, object], None] | None = None

    def keys(self) -> tuple[str, ...]:
        if self.settings is None:
            return ()
        return tuple(item.key for item in declared(self.settings) if item.info.in_file)


def dotted(names: Names) -> str:
    return ".".join(names)


@dataclass(frozen=True)
class Problem:
    """One name or value of the file that obsmask cannot use, at ``names``."""

    names: Names
    message: str


class KnownTables:
    """The tables of ``tables`` and the tables that hold them (a header
    such as ``[observation_masking.schema1]`` makes ``observation_masking``
    a table too)."""

    def __init__(self, tables: Sequence[FileTable]) -> None:
        self.declared: Mapping[Names, FileTable] = {table.names: table for table in tables}
        self.all: frozenset[Names] = frozenset(
            table.names[:end] for table in tables for end in range(1, len(table.names) + 1))

    def table(self, names: Names) -> FileTable | None:
        """What table ``names`` holds: a declared one, or one named by the
        user inside a ``named`` table (it holds the same keys)."""
        found = self.declared.get(names)
        if found is not None or not names:
            return found
        parent = self.declared.get(names[:-1])
        if parent is not None and parent.named:
            return FileTable(names, parent.settings)
        return None

    def is_table(self, names: Names) -> bool:
        return not names or names in self.all or self.table(names) is not None

    def children(self, names: Names) -> list[Names]:
        """The known tables right inside ``names``, in declaration order."""
        return sorted((known for known in self.all
                       if len(known) == len(names) + 1 and known[:-1] == names),
                      key=self._order)

    def _order(self, names: Names) -> int:
        return next(i for i, table in enumerate(self.declared) if table[:len(names)] == names)

    def shown(self, names: Names) -> str:
        """``[a.b]``, or ``[a.b.NAME]`` for a table of user-named tables."""
        table = self.declared.get(names)
        return f"[{dotted(names)}{'.NAME' if table is not None and table.named else ''}]"


def problems(document: Mapping[str, object], tables: Sequence[FileTable]) -> list[Problem]:
    """Every table, key and value of ``document`` that is not one of
    ``tables``' or not acceptable, in the document's order."""
    return list(_walk(KnownTables(tables), (), document))


def _walk(known: KnownTables, at: Names, table: Mapping[str, object]) -> Iterator[Problem]:
    here = known.table(at)
    for key, value in table.items():
        names = (*at, key)
        if isinstance(value, dict) and known.is_table(names):
            yield from _walk(known, names, value)
        elif here is not None and here.named:
            yield Problem(names, f"[{dotted(at)}] {key}: must be a table, "
                                 f"{known.shown(at)} (the name is yours)")
        elif known.is_table(names):
            yield Problem(names, f"[{dotted(names)}] must be a table")
        elif here is not None and (key in here.keys() or here.entry is not None):
            try:
                _check_value(here, key, value)
            except SettingError as e:
                yield Problem(names, f"[{dotted(at)}] {e.key}: {e.message}")
        else:
            yield Problem(names, _unknown(known, names, isinstance(value, dict)))


def _check_value(table: FileTable, key: str, value: object) -> None:
    """SettingError unless ``value`` is acceptable for ``key`` of ``table``."""
    if table.settings is not None and key in table.keys():
        check_value(table.settings, key, value)
    elif table.entry is not None:
        table.entry(key, value)


def _unknown(known: KnownTables, names: Names, is_table: bool) -> str:
    """What is wrong with the unknown ``names``, and the name meant."""
    at, name = names[:-1], names[-1]
    here = known.table(at)
    tables = {child[-1]: known.shown(child) for child in known.children(at)}
    keys = {key: key for key in (here.keys() if here is not None else ())}
    # A table is likely a misspelt table, a key a misspelt key; either may be
    # the other, so both are candidates, the likelier kind first.
    candidates = {**tables, **keys} if is_table else {**keys, **tables}
    close = closest(name, list(candidates))
    if close:
        hint = f" (did you mean {' or '.join(candidates[c] for c in close)}?)"
    elif (home := _home_of(known, name)) is not None:
        hint = f" (a key of {home})"
    else:
        known_names = [part for part in (_listed("tables", list(tables.values())),
                                         _listed("keys", list(keys.values()))) if part]
        hint = "; " + ", ".join(known_names) if known_names else ""
    if is_table:
        return f"unknown table [{dotted(names)}]{hint}"
    where = f"[{dotted(at)}] " if at else ""
    return f"{where}{name}: unknown key{' outside every table' if not at else ''}{hint}"


def _home_of(known: KnownTables, key: str) -> str | None:
    """The table that has ``key`` (a key written in the wrong table)."""
    for table in known.declared.values():
        if key in table.keys():
            return known.shown(table.names)
    return None


def _listed(kind: str, names: Sequence[str]) -> str:
    return f"the {kind} are {', '.join(names)}" if names else ""
