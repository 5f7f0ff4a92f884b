"""Values read back from saved metadata: a value of the wrong type is read
as absent, never as a number it is not."""

from __future__ import annotations

import pytest

from obsmask_core.shared.read_back import amount, count, mapping, whole, word


@pytest.mark.parametrize(("value", "expected"), [
    (3, 3), (-2, -2), (0, 0), (True, None), (2.0, None), ("3", None), (None, None)])
def test_whole_takes_ints_but_not_bools_floats_or_text(value: object, expected: int | None):
    assert whole(value) == expected


def test_a_count_is_never_negative():
    assert count(5) == 5 and count(0) == 0
    assert count(-1) is None and count(False) is None


def test_an_amount_takes_ints_and_floats_that_are_not_negative():
    assert amount(2) == 2.0 and amount(0.5) == 0.5
    assert amount(-0.1) is None and amount(True) is None and amount("1") is None


def test_words_and_mappings_are_read_as_absent_when_they_are_something_else():
    assert word("masked") == "masked" and word(3) is None
    assert mapping({"a": 1}) == {"a": 1} and mapping([("a", 1)]) == {}
