"""The words of recall (``shared/recall_text.py``): the stub the recall tool
answers with is read back exactly, a selection gives the lines asked for,
and a cut string's id depends on its text alone."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.shared.recall_text import (
    MAX_ENCODED_PATTERN,
    STUB_RESULT_MAX_CHARS,
    RecallQuery,
    find_stub,
    hint,
    is_recall_id,
    is_store_id,
    pattern_fits,
    store_id,
)

TEXT = "alpha\nbeta\r\ngamma error\ndelta\nepsilon error\n"

ids = st.from_regex(r"[A-Za-z0-9_.:\-]{1,40}", fullmatch=True)


@given(ids, st.none() | st.integers(1, 10**6), st.none() | st.integers(1, 10**6),
       st.none() | st.text(min_size=1, max_size=60))
def test_a_stub_is_read_back_as_the_query_that_wrote_it(recall_id, first, last, pattern):
    """Whatever the id, line range and pattern (any characters), the stub
    the recall tool answers with is found again in a tool result, giving
    back the same query."""
    query = RecallQuery(recall_id, first, last, pattern)
    # A range with no first line starts at line 1.
    expected_first = 1 if first is None and last is not None else first
    assert find_stub(query.stub()) == RecallQuery(recall_id, expected_first, last, pattern)


def test_a_stub_wrapped_in_json_by_the_agent_is_still_found():
    """An agent that sends an MCP answer as JSON (its content blocks) still
    sends a stub: the stub holds no character that JSON escapes."""
    stub = RecallQuery("call_7", pattern='say "hi" \\ there').stub()
    wrapped = json.dumps([{"type": "text", "text": stub}])
    assert stub in wrapped
    assert find_stub(wrapped) == RecallQuery("call_7", pattern='say "hi" \\ there')


def test_a_text_with_two_stubs_or_a_long_text_is_not_a_stub():
    """Only a result that is one stub (and little else) is replaced: a long
    output that merely quotes a stub, or two stubs, stays as it is."""
    stub = RecallQuery("call_1").stub()
    assert find_stub(stub + stub) is None
    assert find_stub(stub + "x" * STUB_RESULT_MAX_CHARS) is None
    assert find_stub("[obsmask-recall id=call 1]") is None


def test_the_whole_selection_is_the_text_byte_for_byte():
    """With no range or pattern, the text comes back exactly, line endings included."""
    assert RecallQuery("a").select(TEXT) == TEXT


def test_a_line_range_gives_those_lines_as_they_are():
    """Lines 2 to 3 (1-based, both included) come back with their own line endings."""
    assert RecallQuery("a", 2, 3).select(TEXT) == "beta\r\ngamma error\n"
    assert RecallQuery("a", 4, None).select(TEXT) == "delta\nepsilon error\n"
    assert RecallQuery("a", None, 1).select(TEXT) == "alpha\n"


def test_lines_are_counted_at_newlines_only_as_sed_counts_them():
    """A form feed, a lone carriage return or a Unicode line separator does
    not start a line: line numbers are the ones grep -n and sed -n give."""
    text = "one\fstill one\ntwo\rstill two\u2028same\nthree"
    assert RecallQuery("a", 2, 2).select(text) == "two\rstill two\u2028same\n"
    assert RecallQuery("a", 3, 3).select(text) == "three"
    assert RecallQuery("a", pattern="three").select(text) == "3: three\n"


def test_a_pattern_the_server_accepts_always_fits_in_its_stub():
    """The longest pattern the recall tool takes, in characters that percent
    encoding makes longest, still gives a stub that is found again."""
    pattern = "\U0001f600" * (MAX_ENCODED_PATTERN // 12)
    assert pattern_fits(pattern) and not pattern_fits(pattern + "\U0001f600")
    assert find_stub(RecallQuery("call_0", pattern=pattern).stub()) == RecallQuery(
        "call_0", pattern=pattern)


def test_a_range_past_the_end_says_the_text_is_shorter():
    """Asking for lines the text does not have gives a note with its line count."""
    assert "has 5 lines" in RecallQuery("a", 9, 12).select(TEXT)


def test_a_pattern_gives_the_numbered_lines_that_hold_it():
    """The lines containing the pattern come back, each after its number."""
    assert RecallQuery("a", pattern="error").select(TEXT) == "3: gamma error\n5: epsilon error\n"
    assert "contains 'zeta'" in RecallQuery("a", pattern="zeta").select(TEXT)


def test_a_cut_string_id_depends_on_its_text_alone():
    """The same string always gets the same store id (the marker's bytes stay
    stable); another string gets another; a lone surrogate is fine."""
    assert store_id("x" * 10_000) == store_id("x" * 10_000)
    assert store_id("x" * 10_000) != store_id("x" * 10_001)
    assert is_store_id(store_id("\ud800 lone")) and is_recall_id(store_id("a"))


@pytest.mark.parametrize("recall_id", ["call_abc", "toolu_01AbC", "fc_68a.1:2", store_id("t")])
def test_the_hint_names_the_id_and_is_empty_when_recall_is_off(recall_id):
    """``{recall}`` renders "; recall id=ID", or nothing at all when recall is off."""
    assert hint(recall_id) == f"; recall id={recall_id}"
    assert hint(None) == ""
