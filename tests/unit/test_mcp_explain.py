"""What the content view says of a cut MCP answer (``mcp/explain.py``):
each cut string with its message id, its place, its sizes and its recall
id, found by comparing with the original when the flow has it and by the
markers when it does not; JSON answers, batches and event streams; the
page's diff made message by message (one small diff per changed message,
however long the answer), or whole within a bound when the messages do not
line up."""

from __future__ import annotations

import json

import pytest

from obsmask_core.mcp.answer_messages import answer_messages, event_data, strings_of
from obsmask_core.mcp.cut import truncate_jsonrpc_text
from obsmask_core.mcp.explain import (
    CutExplanation,
    CutFacts,
    CutRecord,
    cut_page,
    explain_cuts,
    streamed_page,
)
from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.shared.recall_text import store_id
from obsmask_core.shared.truncation import DEFAULT_MARKER, TruncationMarker
from obsmask_core.shared.view_text import DIFF_WORK, page_text

LIMITS = TruncationLimits(max_chars=4000, head_chars=1000, tail_chars=1000)
FIRST = "HEAD" + "a" * 9000 + "TAIL"
SECOND = "B" * 5000



def answer(message_id: object, *texts: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": message_id,
            "result": {"content": [{"type": "text", "text": t} for t in texts],
                       "structuredContent": {"short": "kept"}}}


def cut(text: str, *, recall: bool = False) -> str:
    outcome = truncate_jsonrpc_text(text, LIMITS, recall=recall)
    assert outcome.text is not None
    return outcome.text


def sse(*messages: object) -> str:
    return "".join(f"event: message\ndata: {json.dumps(m)}\n\n" for m in messages)


def test_a_json_answer_compared_with_its_original():
    original = json.dumps(answer(7, FIRST, "short", SECOND))
    explanation = explain_cuts(cut(original), original, DEFAULT_MARKER, event_stream=False)
    assert explanation.compared
    assert [(c.event, c.message_id, c.path, c.chars_before, c.recall_id)
            for c in explanation.cuts] == [
        (None, "7", "result.content[0].text", len(FIRST), None),
        (None, "7", "result.content[2].text", len(SECOND), None),
    ]
    assert all(c.chars_after < 2200 for c in explanation.cuts)
    assert explanation.chars_before == len(FIRST) + len(SECOND)


def test_without_the_original_the_markers_say_what_was_cut():
    original = json.dumps(answer("a", FIRST, "short"))
    explanation = explain_cuts(cut(original, recall=True), None, DEFAULT_MARKER,
                               event_stream=False)
    assert not explanation.compared
    assert explanation.cuts == (CutFacts(None, '"a"', "result.content[0].text", len(FIRST),
                                         explanation.cuts[0].chars_after, store_id(FIRST)),)


def test_a_batch_names_each_message():
    original = json.dumps([answer(1, FIRST), answer(2, "small"), answer(3, SECOND)])
    explanation = explain_cuts(cut(original), original, DEFAULT_MARKER, event_stream=False)
    assert [(c.message_id, c.path) for c in explanation.cuts] == [
        ("1", "result.content[0].text"), ("3", "result.content[0].text")]


def test_an_event_stream_names_the_event():
    events = [answer(1, "small"), answer(2, FIRST)]
    original = sse(*events)
    cut_stream = sse(*(json.loads(cut(json.dumps(m))) if m["id"] == 2 else m for m in events))
    for before in (original, None):
        explanation = explain_cuts(cut_stream, before, DEFAULT_MARKER, event_stream=True)
        assert explanation.compared is (before is not None)
        assert [(c.event, c.message_id, c.chars_before) for c in explanation.cuts] == [
            (2, "2", len(FIRST))]


def test_another_marker_template_is_read_with_its_own_fields():
    marker = TruncationMarker("[cut {original_chars}]")
    text = json.dumps(answer(1, "x" * 10 + "[cut 5000]" + "y" * 10))
    explanation = explain_cuts(text, None, marker, event_stream=False)
    assert [(c.chars_before, c.recall_id) for c in explanation.cuts] == [(5000, None)]
    assert explain_cuts(text, None, DEFAULT_MARKER, event_stream=False).cuts == ()


def test_an_original_of_another_shape_falls_back_to_the_markers_and_says_so():
    """The original is in the flow, but its messages do not line up with the
    cut answer's: the page says that (not that the original is missing),
    and diffs the two bodies whole."""
    original = sse(answer(1, FIRST))
    cut_text = cut(json.dumps(answer(1, FIRST)))
    explanation = explain_cuts(cut_text, original, DEFAULT_MARKER, event_stream=False)
    assert not explanation.compared and len(explanation.cuts) == 1 and explanation.parts == ()
    page = page_text(cut_page(explanation, CutRecord(), cut_text, original, event_stream=False))
    assert ("  (read from the markers: the original answer's messages do not line up with the "
            "cut answer's)") in page.splitlines()
    assert "not in the flow" not in page
    assert "The original answer (-) and the one that went out (+), pretty-printed JSON:" in page
    assert "--- original answer" in page and "-event: message" in page


def test_event_data_reads_the_framing_of_the_specification():
    stream = ": comment\r\nevent: a\r\ndata: one\r\ndata: two\r\n\r\ndata:three\n\nid: 4\n\n"
    assert event_data(stream) == ["one\ntwo", "three"]
    assert answer_messages('{"a": 1}\n', event_stream=False) == [(None, {"a": 1})]
    assert answer_messages("data: not json\n\n", event_stream=True) == []


def test_paths_name_members_and_positions():
    value = {"result": {"a b": ["x", {"c": "y"}], "n": 1}}
    assert list(strings_of(value)) == [('result["a b"][0]', "x"), ('result["a b"][1].c', "y")]


def test_the_page_lists_the_cuts_the_comment_and_the_diff():
    original = json.dumps(answer(7, FIRST))
    cut_text = cut(original, recall=True)
    explanation = explain_cuts(cut_text, original, DEFAULT_MARKER, event_stream=False)
    record = CutRecord.of({"action": "truncated", "transport": "json", "messages_truncated": 1,
                           "strings_cut": 1, "chars_before": len(FIRST), "chars_after": 2071,
                           "tokens_saved": 900, "recall_ids": [store_id(FIRST), 3]})
    assert record.recall_ids == (store_id(FIRST),)
    lines = cut_page(explanation, record, cut_text, original, event_stream=False,
                     comment=["obsmask: cut 1 long string(s) in 1 MCP response(s)"])
    page = page_text(lines)
    assert "obsmask: cut MCP answer (JSON)" in page
    assert f"1 string(s) cut in 1 response(s): {len(FIRST):,} -> 2,071 chars, 900 tokens" in page
    assert f"id 7  result.content[0].text  {len(FIRST):,} -> " in page
    assert f"recall id {store_id(FIRST)}" in page
    assert "  obsmask: cut 1 long string(s) in 1 MCP response(s)" in page.splitlines()
    removed = [line.text for line in lines if line.kind == "removed"]
    added = [line.text for line in lines if line.kind == "added"]
    assert any("HEADaaaa" in line and "TAIL" in line and "OBSMASK" not in line
               for line in removed)
    assert any("OBSMASK_TRUNCATED original_chars=9008" in line for line in added)


def test_the_page_of_an_answer_without_its_original_shows_the_answer():
    cut_text = sse(json.loads(cut(json.dumps(answer(2, FIRST)))))
    explanation = explain_cuts(cut_text, None, DEFAULT_MARKER, event_stream=True)
    page = page_text(cut_page(explanation, CutRecord(), cut_text, None, event_stream=True))
    assert "(read from the markers: the original answer is not in the flow)" in page
    assert "event 2" not in page and "event 1 id 2" in page
    assert "The original answer is not in the flow: no diff." in page
    assert "data:\n{\n" in page


def test_the_page_of_a_streamed_answer_says_no_body_was_kept():
    record = CutRecord(transport="sse", messages_truncated=2, strings_cut=3, chars_before=30000,
                       chars_after=12000, recall_ids=("cut-1", "cut-2"))
    page = page_text(streamed_page(record, '{"jsonrpc": "2.0", "id": 3, "method": "tools/call"}',
                                   ["obsmask: cut 3 long string(s)"]))
    assert "3 string(s) cut in 2 response(s): 30,000 -> 12,000 chars" in page
    assert "mitmproxy keeps no body of a streamed answer" in page
    assert "  cut-1, cut-2" in page.splitlines()
    assert '"method": "tools/call"' in page


def test_an_empty_explanation_counts_nothing():
    assert CutExplanation((), True).chars_before == 0
    unknown = CutExplanation((CutFacts(None, None, "x", None, 3, None),), False)
    assert unknown.chars_before is None and unknown.chars_after == 3


def test_the_diff_is_made_message_by_message_headed_by_its_event_place_and_id(compared):
    batch = json.dumps([answer(1, FIRST), answer(2, "small"), answer(None, SECOND)])
    explanation = explain_cuts(cut(batch), batch, DEFAULT_MARKER, event_stream=False)
    lines = cut_page(explanation, CutRecord(), cut(batch), batch, event_stream=False)
    assert [line.text for line in lines if line.kind == "hunk"] == [
        "@@ message 1 of 3 (id 1) @@", "@@ message 3 of 3 (id null) @@"]
    page = page_text(lines)
    assert ("The messages that changed, in the original answer (-) and as they went out (+), "
            "pretty-printed JSON:") in page
    assert len(compared) == 2 and all(max(sides) < 20 for sides in compared)

    one = json.dumps(answer("a", FIRST))
    explanation = explain_cuts(cut(one), one, DEFAULT_MARKER, event_stream=False)
    assert [part.label for part in explanation.parts] == ['the message (id "a")']

    events = [answer(1, "small"), [answer(2, FIRST), answer(3, "small")]]
    stream = sse(*events)
    cut_stream = sse(answer(1, "small"), json.loads(cut(json.dumps(events[1]))))
    explanation = explain_cuts(cut_stream, stream, DEFAULT_MARKER, event_stream=True)
    assert [part.label for part in explanation.parts] == ["event 2, message 1 of 2 (id 2)"]
    assert '"text": "HEADaaaa' in explanation.parts[0].before


@pytest.mark.parametrize("event_stream", [False, True], ids=["batch", "event stream"])
def test_a_cut_answer_of_three_thousand_messages_is_diffed_one_message_at_a_time(
        compared, event_stream):
    """However long the answer, the page compares each changed message on
    its own: as many small comparisons as messages cut, their work far
    below the bound, and each hunk covers one message."""
    limits = TruncationLimits(max_chars=100, head_chars=20, tail_chars=20)
    messages = [answer(n, f"HEAD{n}" + "z" * 200) for n in range(3_000)]
    cut_messages = [json.loads(truncate_jsonrpc_text(json.dumps(m), limits).text or "")
                    for m in messages]
    if event_stream:
        original, cut_text = sse(*messages), sse(*cut_messages)
    else:
        original, cut_text = json.dumps(messages), json.dumps(cut_messages)
    explanation = explain_cuts(cut_text, original, DEFAULT_MARKER, event_stream=event_stream)
    assert explanation.compared and len(explanation.cuts) == 3_000
    compared.clear()
    lines = cut_page(explanation, CutRecord(), cut_text, original, event_stream=event_stream)
    assert len(compared) == 3_000 and all(max(sides) <= 16 for sides in compared)
    assert sum(a * b for a, b in compared) < DIFF_WORK / 4
    hunks = [n for n, line in enumerate(lines) if line.kind == "hunk"]
    # Places are written as the table of cut strings writes them: 1234, not 1,234.
    assert [lines[n].text for n in hunks] == [
        f"@@ event {n + 1} (id {n}) @@" if event_stream
        else f"@@ message {n + 1} of 3000 (id {n}) @@" for n in range(3_000)]
    for number, (start, end) in enumerate(zip(hunks, [*hunks[1:], len(lines)], strict=True)):
        changed = [line.text for line in lines[start + 1:end] if line.kind != "context"]
        assert len(changed) == 2
        assert changed[0].startswith(f'-        "text": "HEAD{number}zzz')
        assert "OBSMASK_TRUNCATED" in changed[1]


def test_a_marker_with_a_figure_of_thousands_of_digits_is_not_taken_for_a_cut():
    """Read from the markers (no original), a string whose "marker" counts
    5,000 digits is no cut string: the page lists none, rather than failing
    on int() (which refuses more than 4,300 digits)."""
    text = f"x\n... [OBSMASK_TRUNCATED original_chars={'9' * 5_000} head=1 tail=1] ...\ny"
    body = json.dumps(answer(1, text))
    explanation = explain_cuts(body, None, DEFAULT_MARKER, event_stream=False)
    assert explanation.cuts == ()
    page = page_text(cut_page(explanation, CutRecord(), body, None, event_stream=False))
    assert "Cut strings (0):" in page and "  none found" in page
