"""Reading the settings file (``shared/config_file.py``): a missing default
file means the recommended settings the package ships (the built-in
defaults when the package lacks them), a missing file that was named is an
error, and every error names the file, and the table and key when there is
one."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from obsmask_core.shared import config_file
from obsmask_core.shared.config_file import (
    RECOMMENDED_CONFIG,
    ConfigFile,
    load_config,
    read_config_bytes,
)
from obsmask_core.shared.errors import ConfigError
from obsmask_core.shared.settings import check_fields, setting


@dataclass(frozen=True, kw_only=True)
class Knobs:
    size: int = setting(10, "A size.", minimum=1)
    label: str = setting("x", "A label.")

    def __post_init__(self) -> None:
        check_fields(self)


def test_without_the_default_file_the_packaged_recommended_settings_are_read(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = read_config_bytes(None)
    assert found == (str(RECOMMENDED_CONFIG), RECOMMENDED_CONFIG.read_bytes())
    config = load_config(None)
    assert config.recommended and config.path == str(RECOMMENDED_CONFIG)
    assert config.source == "obsmask's recommended settings (no mitm.toml here)"
    assert config.table(("observation_masking", "schema1"))["window_turns"] == 1


def test_without_the_default_file_or_the_packaged_one_the_built_in_defaults_apply(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(config_file, "RECOMMENDED_CONFIG", tmp_path / "not-shipped.toml")
    assert read_config_bytes(None) is None
    config = load_config(None)
    assert config == ConfigFile(path=None)
    assert config.source == "built-in defaults"
    assert config.table(("any", "table")) == {}
    assert config.settings(Knobs, ("knobs",)) == {}


def test_the_default_file_is_mitm_toml_in_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "mitm.toml").write_text("[knobs]\nsize = 3\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    config = load_config(None)
    assert config.path == "mitm.toml" and config.source == "mitm.toml"
    assert config.settings(Knobs, ("knobs",)) == {"size": 3}


def test_a_named_file_that_does_not_exist_is_an_error(tmp_path):
    missing = str(tmp_path / "nope.toml")
    with pytest.raises(ConfigError) as raised:
        load_config(missing)
    assert str(raised.value) == f"{missing}: configuration file not found"


def test_a_file_that_cannot_be_read_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as raised:
        load_config(str(tmp_path))  # a directory
    assert str(raised.value).startswith(f"{tmp_path}: cannot be read: ")


def test_a_file_that_is_not_toml_is_an_error_naming_the_file(toml_file):
    path = toml_file("[knobs\nsize = 3\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: not valid TOML: ")
    assert "line 1" in message


def test_a_file_that_is_not_utf8_is_an_error_naming_the_byte(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes("[knobs]\nlabel = 'caf\u00e9'\n".encode("latin-1"))
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    assert str(raised.value) == f"{path}: not valid TOML: not UTF-8 (byte 20)"


def test_a_table_is_found_at_any_depth(toml_file):
    config = load_config(toml_file("[a.b]\nkey = 1\n[a.c]\nother = 2\n"))
    assert config.table(("a", "b")) == {"key": 1}
    assert config.table(("a",)) == {"b": {"key": 1}, "c": {"other": 2}}
    assert config.table(("a", "missing")) == {}
    assert config.table(()) == config.document


@pytest.mark.parametrize(
    ("text", "names", "where"),
    [("a = 1\n", ("a", "b"), "1: [a]"), ("[a]\nb = 'x'\n", ("a", "b", "c"), "2: [a.b]"),
     ("[a]\nb = [1]\n", ("a", "b"), "2: [a.b]")],
)
def test_a_level_that_is_not_a_table_is_an_error_naming_it_and_its_line(
        toml_file, text, names, where):
    path = toml_file(text)
    with pytest.raises(ConfigError) as raised:
        load_config(path).table(names)
    assert str(raised.value) == f"{path}:{where} must be a table"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[knobs.inner]\nsize = 0\n", "[knobs.inner] size: must be 1 or more, got 0"),
        ("[knobs.inner]\nlabel = 3\n", "[knobs.inner] label: must be a string"),
        ("[knobs.inner]\nsise = 3\n", "[knobs.inner] sise: unknown key (did you mean size?)"),
        ("[knobs.inner]\nxyz = 3\n", "[knobs.inner] xyz: unknown key; the keys are size, label"),
    ],
)
def test_a_wrong_setting_is_an_error_naming_file_line_table_and_key(toml_file, text, message):
    path = toml_file(text)
    with pytest.raises(ConfigError) as raised:
        load_config(path).settings(Knobs, ("knobs", "inner"))
    assert str(raised.value).startswith(f"{path}:2: {message}")


def test_settings_leave_out_the_named_subtables(toml_file):
    config = load_config(toml_file("[knobs]\nsize = 4\n[knobs.extra]\nwhatever = 1\n"))
    assert config.settings(Knobs, ("knobs",), subtables=("extra",)) == {"size": 4}
    with pytest.raises(ConfigError, match=r"\[knobs\] extra: unknown key"):
        config.settings(Knobs, ("knobs",))
