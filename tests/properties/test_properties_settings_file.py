"""Properties of the settings file's check: every name of any TOML text is
placed on the line that writes it, whatever the values around it hold, and
any table or key obsmask reads, misspelt by one character, stops start-up
at its line with the name it was meant to be."""

from __future__ import annotations

import json
import re
import string

import pytest
import tomli
from hypothesis import given, settings
from hypothesis import strategies as st

from obsmask_core.mitm.file_tables import FILE_TABLES
from obsmask_core.shared.config_file import parse_config
from obsmask_core.shared.errors import ConfigError
from obsmask_core.shared.toml_lines import toml_lines

BARE = string.ascii_lowercase + string.digits + "_-"
names = st.text(BARE, min_size=1, max_size=6)
# Values whose text looks like a header, a key or a comment.
decoys = st.sampled_from(["[x]", "[[y]]", "k = 1", "# no", "a.b = 2", '"', "'", "\\"])
values = st.one_of(
    st.integers(-5, 5).map(str),
    st.lists(decoys, max_size=3).map(lambda parts: json.dumps(" ".join(parts))),
    st.lists(decoys, max_size=3).map(lambda parts: "'''\n" + "\n".join(parts) + "\n'''"),
    st.lists(decoys, max_size=3).map(
        lambda parts: "[\n" + "".join(f"  [{json.dumps(p)}],\n" for p in parts) + "]"),
    st.lists(decoys, max_size=2).map(
        lambda parts: "{ " + ", ".join(f"k{i} = {json.dumps(p)}" for i, p in enumerate(parts))
        + " }"),
)


def spelt(name: str, quoted: bool) -> str:
    return json.dumps(name) if quoted else name


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, dict[tuple[str, ...], int]]:
    """A TOML text of tables and keys, spelt and spaced in any of TOML's
    ways, and the line each of its names is written on."""
    out: list[str] = []
    placed: dict[tuple[str, ...], int] = {}
    tables = draw(st.lists(st.tuples(names, names), min_size=1, max_size=4,
                           unique_by=lambda t: t[0]))
    for table in tables:
        out.extend(draw(st.sampled_from([[], [""], ["# a comment [z]"]])))
        gap = draw(st.sampled_from(["", " "]))
        header = f"{gap}.{gap}".join(spelt(n, draw(st.booleans())) for n in table)
        out.append(f"[{gap}{header}{gap}]")
        placed.setdefault(table[:1], len(out))
        placed[table] = len(out)
        for key in draw(st.lists(names, max_size=3, unique=True)):
            out.append(f"{spelt(key, draw(st.booleans()))} = {draw(values)}")
            placed[(*table, key)] = len(out)
            out[-1:] = out[-1].split("\n")  # a value over several lines
    return "\n".join(out) + "\n", placed


@given(documents())
@settings(max_examples=300, deadline=None)
def test_every_name_is_placed_on_the_line_that_writes_it(document):
    text, placed = document
    tomli.loads(text)  # the generator writes valid TOML
    lines = toml_lines(text)
    for names_, line in placed.items():
        assert lines[names_] == line, (names_, text)


# (table, key) and (table, None): every name of the file that obsmask reads
# (the keys of a profile are schema1's).
KNOWN_NAMES = sorted({(table.names, key) for table in FILE_TABLES if not table.named
                      for key in table.keys()}
                     | {(table.names[:end], None) for table in FILE_TABLES
                        for end in range(1, len(table.names) + 1)}, key=str)


@st.composite
def misspellings(draw: st.DrawFn) -> tuple[tuple[str, ...], str | None, str]:
    """A table (or a key of one) that obsmask reads, one character of its
    own name changed."""
    table, key = draw(st.sampled_from(KNOWN_NAMES))
    name = key if key is not None else table[-1]
    at = draw(st.integers(0, len(name) - 1))
    other = draw(st.sampled_from(string.ascii_lowercase).filter(lambda c: c != name[at]))
    wrong = name[:at] + other + name[at + 1:]
    if key is not None:
        return table, wrong, key
    return (*table[:-1], wrong), None, table[-1]


@given(misspellings(), st.integers(0, 3))
@settings(max_examples=400, deadline=None)
def test_a_name_misspelt_by_one_character_is_refused_at_its_line_naming_the_original(
        misspelling, blank_lines):
    table, key, meant = misspelling
    body = f"{key} = 1\n" if key is not None else ""
    text = "\n" * blank_lines + f"[{'.'.join(table)}]\n{body}"
    with pytest.raises(ConfigError) as raised:
        parse_config(("mitm.toml", text.encode()), FILE_TABLES)
    line = blank_lines + (2 if key is not None else 1)
    message = str(raised.value)
    assert message.startswith(f"mitm.toml:{line}: "), message
    # The nearest names, all of them on a tie ("include or exclude"); a
    # table shown whole ([mcp_gateway.masking]), a key alone.
    said = re.search(r"did you mean (.+)\?\)", message)
    assert said is not None, message
    nearest = {name.strip("[]").removesuffix(".NAME").split(".")[-1]
               for name in said.group(1).split(" or ")}
    assert meant in nearest, message
