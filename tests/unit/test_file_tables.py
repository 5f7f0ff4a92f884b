"""The settings file's check (``shared/table_check.py`` with the tables of
``mitm/file_tables.py``): a table or key that obsmask does not read, or a
value it cannot use, stops start-up with the file, the line and the name
meant, where it would otherwise be read as absent."""

from __future__ import annotations

import re

import pytest

from obsmask_core.mitm.file_tables import FILE_TABLES, inner_tables
from obsmask_core.shared.config_file import RECOMMENDED_CONFIG, load_config, parse_config
from obsmask_core.shared.errors import ConfigError
from support.processes import REPO


def refusal(text: str) -> str:
    """The one line that refuses the settings file ``text`` (``mitm.toml``)."""
    with pytest.raises(ConfigError) as raised:
        parse_config(("mitm.toml", text.encode()), FILE_TABLES)
    return str(raised.value)


def test_a_misspelled_section_stops_start_up_with_its_line_and_the_closest_name():
    assert refusal("[obsmask]\nenabled = true\n\n[recal]\nenabled = true\n") == (
        "mitm.toml:4: unknown table [recal] (did you mean [recall]?)")


def test_a_misspelled_subtable_stops_start_up_with_its_line_and_the_closest_name():
    assert refusal("# mine\n[observation_masking.schema]\nwindow_turns = 3\n") == (
        "mitm.toml:2: unknown table [observation_masking.schema] "
        "(did you mean [observation_masking.schema1]?)")
    assert refusal("[mcp_gateway.maskin]\nenabled = false\n") == (
        "mitm.toml:1: unknown table [mcp_gateway.maskin] (did you mean [mcp_gateway.masking]?)")


def test_a_misspelled_key_stops_start_up_with_its_line_and_the_closest_name():
    assert refusal("[observation_masking.schema1]\nenabled = true\nwindow_turn = 3\n") == (
        "mitm.toml:3: [observation_masking.schema1] window_turn: unknown key "
        "(did you mean window_turns?)")


def test_a_wrong_value_stops_start_up_with_its_line():
    assert refusal("[recall]\n\nenabled = 1\n") == (
        "mitm.toml:3: [recall] enabled: must be a boolean, got an integer 1")
    assert refusal("[observation_masking.schema1]\nwindow_turns = -1\n") == (
        "mitm.toml:2: [observation_masking.schema1] window_turns: must be 0 or more, got -1")


def test_a_name_close_to_none_lists_the_known_names():
    assert refusal("[caching]\n") == (
        "mitm.toml:1: unknown table [caching]; the tables are [obsmask], "
        "[observation_masking], [mcp_gateway], [recall], [totals]")
    assert refusal("[totals]\nzzz = 1\n") == (
        "mitm.toml:2: [totals] zzz: unknown key; the keys are enabled, allow_clients, "
        "conversations_kept, input_cents_per_million_tokens")


def test_a_key_in_the_wrong_table_names_the_table_it_belongs_to():
    assert refusal("[obsmask]\nwindow_turns = 2\n") == (
        "mitm.toml:2: [obsmask] window_turns: unknown key "
        "(a key of [observation_masking.schema1])")
    assert refusal("max_chars = 10\n") == (
        "mitm.toml:1: max_chars: unknown key outside every table "
        "(a key of [mcp_gateway.masking])")


def test_names_written_as_dotted_keys_or_inline_tables_are_checked_at_their_line():
    assert refusal("[obsmask]\nenabled = true\nrecal.enabled = true\n") == (
        "mitm.toml:3: unknown table [obsmask.recal]; the keys are enabled")
    assert refusal("[mcp_gateway]\nmasking = { enabled = false, max_char = 9 }\n") == (
        "mitm.toml:2: [mcp_gateway.masking] max_char: unknown key "
        "(did you mean max_chars?)")


def test_profiles_and_servers_take_any_name_but_their_keys_and_values_are_checked():
    named = ("[observation_masking.profiles.my-own]\nwindow_turns = 2\n"
             "[mcp_gateway.servers]\nany-name = 'http://127.0.0.1:8004/mcp'\n")
    assert parse_config(("mitm.toml", named.encode()), FILE_TABLES).table(
        ("observation_masking", "profiles", "my-own")) == {"window_turns": 2}
    assert refusal("[observation_masking.profiles.mine]\nwindow_turn = 2\n") == (
        "mitm.toml:2: [observation_masking.profiles.mine] window_turn: unknown key "
        "(did you mean window_turns?)")
    assert refusal("[observation_masking.profiles]\nwindow_turns = 2\n") == (
        "mitm.toml:2: [observation_masking.profiles] window_turns: must be a table, "
        "[observation_masking.profiles.NAME] (the name is yours)")
    assert refusal("[mcp_gateway.servers]\nfs = 'ftp://127.0.0.1'\n") == (
        "mitm.toml:2: [mcp_gateway.servers] fs: 'ftp://127.0.0.1' is not an http:// or "
        "https:// URL with a host")


def test_a_table_written_as_a_value_is_refused_at_its_line():
    assert refusal("[obsmask]\n[mcp_gateway]\nmasking = 3\n") == (
        "mitm.toml:3: [mcp_gateway.masking] must be a table")
    assert refusal("recall = true\n") == "mitm.toml:1: [recall] must be a table"


def test_the_first_problem_by_line_is_said_with_how_many_more():
    message = refusal("[totals]\nenabled = true\n[recal]\n[obsmask]\nenabeld = true\n")
    assert message == "mitm.toml:3: unknown table [recal] (did you mean [recall]?) (and 1 more)"


@pytest.mark.parametrize("path", [REPO / "mitm.toml", RECOMMENDED_CONFIG],
                         ids=["checkout", "package"])
def test_the_shipped_settings_files_pass_the_check(path):
    config = load_config(str(path), FILE_TABLES)
    assert config.table(("observation_masking", "schema1"))


def test_every_settings_file_in_the_docs_passes_the_check():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    blocks = [(page.name, block) for page in pages
              for block in re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"),
                                      re.S)]
    assert blocks
    for name, block in blocks:
        parse_config((name, block.encode()), FILE_TABLES)


def test_a_file_read_without_the_tables_is_not_checked():
    """Other TOML files (the benchmarks' own) are read with the same reader."""
    assert parse_config(("other.toml", b"[anything]\nx = 1\n")).table(("anything",)) == {"x": 1}


def test_the_tables_inside_a_table_come_from_the_declarations():
    assert inner_tables(("mcp_gateway",)) == ("masking", "servers")
    assert inner_tables(("observation_masking",)) == ("schema1", "profiles")
    assert inner_tables(("recall",)) == ()
