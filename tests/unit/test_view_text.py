"""The text of obsmask's content view (``shared/view_text.py``): a body
pretty-printed, the unified diff of two texts by kind of line, tables and
lists of ids laid out for a reader, and the flow's comment one line each."""

from __future__ import annotations

from obsmask_core.shared.view_text import (
    ViewLine,
    comment_lines,
    diff_lines,
    number,
    page_text,
    paragraph,
    pretty_body,
    pretty_json,
    sizes,
    table,
    wrapped,
)


def test_json_is_pretty_printed_with_its_characters_as_they_are():
    assert pretty_json('{"a":[1,"é"],"n":NaN}') == (
        '{\n  "a": [\n    1,\n    "é"\n  ],\n  "n": NaN\n}')
    assert pretty_json("not json") is None
    assert pretty_body("plain text") == "plain text"


def test_the_diff_says_which_lines_went_and_which_came():
    before = "a\nb\nc\nd\ne\nf\ng\nh\n"
    after = "a\nb\nc\nD\ne\nf\ng\nh\n"
    lines = diff_lines(before, after, "old", "new", context=1)
    assert lines == [
        ViewLine("heading", "--- old"), ViewLine("heading", "+++ new"),
        ViewLine("hunk", "@@ -3,3 +3,3 @@"), ViewLine("context", " c"),
        ViewLine("removed", "-d"), ViewLine("added", "+D"), ViewLine("context", " e"),
    ]
    assert diff_lines("same", "same", "old", "new") == []


def test_a_removed_line_that_starts_like_a_header_is_still_removed():
    lines = diff_lines("--x\nkeep\n", "keep\n", "old", "new")
    assert ViewLine("removed", "---x") in lines


def test_tables_align_their_columns_and_ids_wrap():
    assert page_text(table([("masked", "call_1", "bash"), ("clipped", "c", "read")])) == (
        "  masked   call_1  bash\n  clipped  c       read")
    assert table([]) == []
    ids = [f"call_{n:03d}" for n in range(20)]
    lines = wrapped(ids, indent="  ", width=40)
    assert all(len(line.text) <= 41 for line in lines)
    assert ", ".join(line.text.strip().rstrip(",") for line in lines) == ", ".join(ids)
    assert [line.text for line in paragraph("one two three four", "  ", width=12)] == [
        "  one two", "  three four"]


def test_numbers_and_sizes_read_like_the_flow_comment():
    assert number(1234567) == "1,234,567" and number(None) == "n/a"
    assert sizes(5186, 98, "chars") == "5,186 -> 98 chars"


def test_the_comment_is_shown_one_line_each():
    lines = comment_lines(["obsmask: masked 2 of 5", "", "obsmask: provider reported 3"])
    assert [line.text for line in lines] == [
        "", "The flow's comment:", "  obsmask: masked 2 of 5", "  obsmask: provider reported 3"]
    assert comment_lines([]) == comment_lines([""]) == []
