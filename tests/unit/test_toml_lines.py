"""Where each table and key of a TOML text is written (``shared/toml_lines.py``):
the line an error about the settings file points at."""

from __future__ import annotations

import tomli

from obsmask_core.shared.config_file import RECOMMENDED_CONFIG
from obsmask_core.shared.toml_lines import line_of, toml_lines


def test_a_table_header_and_its_keys_are_placed_on_their_lines():
    lines = toml_lines("# settings\n\n[recall]\nenabled = true\n\n[totals]\nenabled = false\n")
    assert dict(lines) == {("recall",): 3, ("recall", "enabled"): 4,
                           ("totals",): 6, ("totals", "enabled"): 7}


def test_a_longer_header_places_the_tables_that_hold_it_at_its_line():
    lines = toml_lines("[a.b]\nx = 1\n[a]\ny = 2\n[a.c]\n")
    assert lines[("a",)] == 1 and lines[("a", "b")] == 1
    assert lines[("a", "y")] == 4 and lines[("a", "c")] == 5


def test_quoted_and_spaced_names_are_read_as_toml_reads_them():
    text = '[ a . "b c" ]\n\'d.e\' = 1\n"f\\u0041" . g = 2\n'
    assert tomli.loads(text) == {"a": {"b c": {"d.e": 1, "fA": {"g": 2}}}}
    lines = toml_lines(text)
    assert lines[("a", "b c")] == 1
    assert lines[("a", "b c", "d.e")] == 2
    assert lines[("a", "b c", "fA")] == 3 and lines[("a", "b c", "fA", "g")] == 3


def test_dotted_keys_place_every_level_at_their_line():
    lines = toml_lines("top = 0\nrecall.enabled = true\n[a]\nb.c.d = 1\n")
    assert lines[("recall",)] == 2 and lines[("recall", "enabled")] == 2
    assert lines[("a", "b")] == 4 and lines[("a", "b", "c", "d")] == 4


def test_nothing_inside_a_string_or_an_array_is_taken_for_a_name():
    text = (
        'text = """\n[fake]\nnot_a_key = 1\n"""\n'
        "literal = '''\n[fake2]\n'''\n"
        'pairs = [\n  ["x"],\n  ["[y]", "# z"],\n]\n'
        'escaped = "a \\" [fake3] \\\\"\n'
        "quoted = \"\"\"ends with quotes\"\"\"\"\"\n"
        "windows = 'C:\\'\n"
        "real = 1\n"
    )
    document = tomli.loads(text)
    lines = toml_lines(text)
    assert set(lines) == {(key,) for key in document}
    assert lines[("real",)] == text.splitlines().index("real = 1") + 1
    assert lines[("pairs",)] == 8 and lines[("escaped",)] == 12


def test_a_name_inside_an_inline_table_is_placed_at_the_key_that_holds_it():
    lines = toml_lines("[mcp_gateway]\nmasking = { enabled = false, deep = { x = 1 } }\n")
    assert line_of(lines, ("mcp_gateway", "masking", "deep", "x")) == 2
    assert line_of(lines, ("elsewhere", "x")) is None


def test_an_array_of_tables_is_placed_at_its_first_header():
    lines = toml_lines("[[servers]]\nname = 'a'\n[[servers]]\nname = 'b'\nport = 1\n")
    assert lines[("servers",)] == 1 and lines[("servers", "name")] == 2
    assert lines[("servers", "port")] == 5


def test_windows_line_ends_count_as_lines():
    lines = toml_lines("[a]\r\nx = [\r\n 1,\r\n]\r\ny = 2\r\n")
    assert lines[("a", "x")] == 2 and lines[("a", "y")] == 5


def test_every_table_and_key_of_the_shipped_settings_is_placed_on_a_line_that_names_it():
    text = RECOMMENDED_CONFIG.read_text(encoding="utf-8")
    lines = toml_lines(text)
    source = text.splitlines()

    def paths(table: dict[str, object], at: tuple[str, ...]) -> list[tuple[str, ...]]:
        found = []
        for key, value in table.items():
            found.append((*at, key))
            if isinstance(value, dict):
                found.extend(paths(value, (*at, key)))
        return found

    for names in paths(tomli.loads(text), ()):
        assert names[-1] in source[lines[names] - 1], names
