"""Settings declared once (``shared/settings.py``): what a declaration says
(kind, default, help, bound, check, file or option only), and how a value
is checked and typed: a wrong value is a SettingError naming the key, never
a silent fallback, and a boolean is not an integer."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.settings import (
    build,
    check_fields,
    check_value,
    declared,
    find,
    setting,
    typed_value,
    values_from_table,
)


def _no_spaces(key: str, value: object) -> None:
    if isinstance(value, str) and " " in value:
        raise SettingError(key, "must not hold spaces")


CHECKED: list[tuple[str, object]] = []


def _record(key: str, value: object) -> None:
    CHECKED.append((key, value))


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One setting of each kind, and a field that is not a setting."""

    flag: bool = setting(True, """A flag,
        written on   two lines.""")
    count: int = setting(3, "How many.", minimum=1)
    free: int = setting(-5, "Any integer.")
    name: str = setting("x", "A name.", check=_no_spaces)
    names: tuple[str, ...] = setting((), "Names.", check=_record)
    pairs: tuple[tuple[str, str], ...] = setting((), "Pairs.", in_file=False,
                                                 option="pair_list")
    plain: int = 0

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class Unsupported:
    ratio: float = setting(0.5, "Not a kind TOML and options share.")


def setting_of(key: str):
    return find(Sample, key, in_file=False)


def test_declared_lists_the_settings_in_order_with_their_kinds():
    found = declared(Sample)
    assert [(item.key, item.kind, item.default) for item in found] == [
        ("flag", "bool", True), ("count", "int", 3), ("free", "int", -5), ("name", "str", "x"),
        ("names", "strings", ()), ("pairs", "pairs", ())]


def test_a_declaration_carries_its_help_bound_and_option_name():
    assert setting_of("flag").info.help == "A flag, written on two lines."
    assert setting_of("count").info.minimum == 1 and setting_of("free").info.minimum is None
    assert setting_of("pairs").info.in_file is False and setting_of("names").info.in_file
    assert setting_of("pairs").option_name("x_") == "x_pair_list"
    assert setting_of("names").option_name("x_") == "x_names"


def test_a_field_of_another_type_cannot_be_a_setting():
    with pytest.raises(TypeError, match=r"Unsupported\.ratio: no setting kind"):
        declared(Unsupported)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("count", "3", "count: must be an integer, got a string '3'"),
        ("count", 1.5, "count: must be an integer, got a float 1.5"),
        ("count", True, "count: must be an integer, got a boolean True"),
        ("count", 0, "count: must be 1 or more, got 0"),
        ("flag", 1, "flag: must be a boolean, got an integer 1"),
        ("flag", "true", "flag: must be a boolean, got a string 'true'"),
        ("name", None, "name: must be a string, got a NoneType None"),
        ("name", "a b", "name: must not hold spaces"),
        ("names", "a", "names: must be an array of strings, got 'a'"),
        ("names", ["a", 1], "names: must be an array of strings"),
        ("pairs", [["a"]], "pairs: must be an array of [begin, end] pairs"),
        ("pairs", [["a", ""]], "pairs: must be an array of [begin, end] pairs"),
        ("pairs", [["a", "b", "c"]], "pairs: must be an array of [begin, end] pairs"),
        ("pairs", "a|b", "pairs: must be an array of [begin, end] pairs"),
    ],
)
def test_a_wrong_value_is_a_setting_error_naming_the_key(key, value, message):
    with pytest.raises(SettingError) as raised:
        typed_value(setting_of(key), value)
    assert str(raised.value).startswith(message)
    assert raised.value.key == key


def test_values_are_typed_as_the_field_says():
    assert typed_value(setting_of("count"), 1) == 1
    assert typed_value(setting_of("free"), -100) == -100  # no bound, no check
    assert typed_value(setting_of("flag"), False) is False
    assert typed_value(setting_of("names"), ["a", "b"]) == ("a", "b")
    assert typed_value(setting_of("names"), ("a",)) == ("a",)
    assert typed_value(setting_of("pairs"), [["<a>", "</a>"], ("[", "]")]) == (
        ("<a>", "</a>"), ("[", "]"))


def test_the_extra_check_sees_the_typed_value():
    CHECKED.clear()
    typed_value(setting_of("names"), ["a"])
    assert CHECKED == [("names", ("a",))]


def test_build_puts_values_over_the_defaults():
    built = build(Sample, {"count": 7, "names": ["a"], "pairs": [["x", "y"]]})
    assert built == Sample(count=7, names=("a",), pairs=(("x", "y"),))
    assert (built.flag, built.free, built.plain) == (True, -5, 0)


def test_build_refuses_an_unknown_key_naming_the_closest_or_listing_the_known_ones():
    with pytest.raises(SettingError) as raised:
        build(Sample, {"cuont": 7})
    assert raised.value.key == "cuont"
    assert raised.value.message == "unknown key (did you mean count?)"
    with pytest.raises(SettingError) as raised:
        build(Sample, {"zzz": 7})
    assert raised.value.message == (
        "unknown key; the keys are flag, count, free, name, names, pairs")
    with pytest.raises(SettingError, match="unknown key"):
        build(Sample, {"plain": 1})  # a field, but no setting


def test_the_file_may_hold_only_the_keys_declared_in_file():
    assert check_value(Sample, "count", 2) == 2
    with pytest.raises(SettingError) as raised:
        check_value(Sample, "pairs", [["x", "y"]])
    assert raised.value.message == "unknown key; the keys are flag, count, free, name, names"
    assert values_from_table(Sample, {"names": ["b"], "flag": False}) == {
        "names": ("b",), "flag": False}


def test_an_instance_checks_its_own_fields():
    with pytest.raises(SettingError) as raised:
        Sample(count=0)
    assert raised.value.key == "count"
    with pytest.raises(SettingError, match="flag: must be a boolean"):
        Sample(flag=1)
