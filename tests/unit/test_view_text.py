"""The text of obsmask's content view (``shared/view_text.py``): a body
pretty-printed, the unified diff of two texts by kind of line, whole or part
by part, and never past its bound of work; tables and lists of ids laid out
for a reader, and the flow's comment one line each."""

from __future__ import annotations

from obsmask_core.shared.view_text import (
    DIFF_WORK,
    DiffPart,
    ViewLine,
    comment_lines,
    diff_lines,
    number,
    page_text,
    paragraph,
    parts_diff_lines,
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



def test_parts_are_compared_one_at_a_time_each_hunk_headed_by_its_label(compared):
    parts = [DiffPart("messages[2] (call_a)", '{\n  "content": "long"\n}',
                      '{\n  "content": "short"\n}'),
             DiffPart("messages[5] (call_b)", "a\nb", "a\nB")]
    assert parts_diff_lines(parts, "old", "new", "items") == [
        ViewLine("heading", "--- old"), ViewLine("heading", "+++ new"),
        ViewLine("hunk", "@@ messages[2] (call_a) @@"), ViewLine("context", " {"),
        ViewLine("removed", '-  "content": "long"'), ViewLine("added", '+  "content": "short"'),
        ViewLine("context", " }"),
        ViewLine("hunk", "@@ messages[5] (call_b) @@"), ViewLine("context", " a"),
        ViewLine("removed", "-b"), ViewLine("added", "+B"),
    ]
    assert compared == [(3, 3), (2, 2)]
    assert parts_diff_lines([], "old", "new") == []


def test_a_part_changed_in_several_places_names_the_lines_of_each_hunk():
    before = "\n".join(f"line {n}" for n in range(20))
    after = before.replace("line 1\n", "LINE 1\n").replace("line 18", "LINE 18")
    hunks = [line.text for line in parts_diff_lines([DiffPart("event 3 (id 7)", before, after)],
                                                    "old", "new") if line.kind == "hunk"]
    assert hunks == ["@@ event 3 (id 7), lines -1,5 +1,5 @@",
                     "@@ event 3 (id 7), lines -16,5 +16,5 @@"]


def test_a_whole_diff_past_the_bound_is_left_out_in_one_line_without_difflib(compared):
    """The work of difflib grows with the product of the two sides' lines:
    past DIFF_WORK (2,000 lines a side) the diff is left out, said once."""
    side = 2_001
    before = "\n".join(f"line {n}" for n in range(side))
    lines = diff_lines(before, before.replace("line 7", "LINE 7"), "old", "new")
    assert lines == [ViewLine("text", "  (the diff is left out: the bodies are too large to "
                                      "compare here, 2,001 and 2,001 lines)")]
    assert compared == []
    at_bound = "\n".join(f"line {n}" for n in range(2_000))
    assert diff_lines(at_bound, at_bound.replace("line 7\n", "LINE 7\n"), "old", "new")
    assert compared == [(2_000, 2_000)] and 2_000 * 2_000 == DIFF_WORK


def test_parts_past_the_bound_are_left_out_from_the_first_that_does_not_fit(compared):
    parts = [DiffPart(f"messages[{n}]", "a\nb", "a\nc") for n in range(5)]
    lines = parts_diff_lines(parts, "old", "new", "items", work=9)
    hunks = [line.text for line in lines if line.kind == "hunk"]
    assert hunks == ["@@ messages[0] @@", "@@ messages[1] @@"]
    assert lines[-1] == ViewLine("text", "  (the diffs of the last 3 changed items, from "
                                         "messages[2] on, are left out: the bodies are too large "
                                         "to compare here)")
    assert compared == [(2, 2), (2, 2)]


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
