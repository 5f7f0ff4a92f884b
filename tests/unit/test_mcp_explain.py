"""What the content view says of a cut MCP answer (``mcp/explain.py``):
each cut string with its message id, its place, its sizes and its recall
id, found by comparing with the original when the flow has it and by the
markers when it does not; JSON answers, batches and event streams."""

from __future__ import annotations

import json

from obsmask_core.mcp.cut import truncate_jsonrpc_text
from obsmask_core.mcp.explain import (
    CutExplanation,
    CutFacts,
    CutRecord,
    answer_messages,
    cut_page,
    event_data,
    explain_cuts,
    streamed_page,
    strings_of,
)
from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.shared.recall_text import store_id
from obsmask_core.shared.truncation import DEFAULT_MARKER, TruncationMarker
from obsmask_core.shared.view_text import page_text

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


def test_an_original_of_another_shape_falls_back_to_the_markers():
    original = sse(answer(1, FIRST))
    cut_text = cut(json.dumps(answer(1, FIRST)))
    explanation = explain_cuts(cut_text, original, DEFAULT_MARKER, event_stream=False)
    assert not explanation.compared and len(explanation.cuts) == 1


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
