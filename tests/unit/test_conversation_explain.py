"""What the content view says of a masked request (``conversation/explain.py``),
in all three wire formats: every result is listed once, with what the diff
of the two bodies shows and why the plan kept it; a plan that does not give
the masked body back (settings changed) leaves the diff's facts and says the
reasons are not available; the page holds the original text and the
placeholder."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from obsmask_core.conversation.explain import (
    MaskingExplanation,
    MaskingRecord,
    NotExplained,
    explain_masking,
    masking_page,
)
from obsmask_core.conversation.policy import MaskPolicy, render_placeholder
from obsmask_core.conversation.rewrite import Masked, mask_request_body
from obsmask_core.conversation.routes import FORMAT_TITLES
from obsmask_core.conversation.wire_formats import CHAT, WireFormat
from obsmask_core.shared.recall_text import RecallQuery
from obsmask_core.shared.truncation import TRUNCATION_MARK
from obsmask_core.shared.view_text import ViewLine, page_text
from support.chat import LONG_OUTPUT
from support.formats import FORMAT_IDS, FORMATS, Call, Event, Result, Say, Turn, convert

all_formats = pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)

TRACEBACK = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
             + "y" * 300 + "\nValueError: boom\n")


def events() -> list[Event]:
    """Old results of every kind, then three recent turns: an orphan, an
    error, a short one, an excluded tool's, and plain ones."""
    return [
        Say("user", "Fix the bug."),
        Result("nobody", LONG_OUTPUT + "\n(orphan)"),
        Turn([Call("call_a"), Call("call_b")], text="turn 0"),
        Result("call_a", LONG_OUTPUT + "\n(call_a)"),
        Result("call_b", TRACEBACK),
        Turn([Call("call_c")], text="turn 1"),
        Result("call_c", "ok"),
        Turn([Call("call_d", "read")], text="turn 2"),
        Result("call_d", LONG_OUTPUT + "\n(call_d)"),
        Turn([Call("call_e")], text="turn 3"),
        Result("call_e", LONG_OUTPUT + "\n(call_e)"),
        Turn([Call("call_f")], text="turn 4"),
        Result("call_f", LONG_OUTPUT + "\n(call_f)"),
        Turn([Call("call_g")], text="turn 5"),
        Result("call_g", LONG_OUTPUT + "\n(call_g)"),
    ]


def request(fmt: WireFormat, conversation: list[Event]) -> bytes:
    return json.dumps({"model": "m", fmt.list_member: convert(fmt, conversation)},
                      ensure_ascii=False).encode()


def masked(fmt: WireFormat, policy: MaskPolicy, conversation: list[Event] | None = None,
           *, recall: bool = False) -> tuple[bytes, Masked]:
    original = request(fmt, conversation or events())
    outcome = mask_request_body(original, policy, fmt, recall=recall)
    assert isinstance(outcome, Masked), outcome.reason
    return original, outcome


def explained(fmt: WireFormat, original: bytes, outcome: Masked, policy: MaskPolicy | None,
              *, recall: bool = False) -> MaskingExplanation:
    explanation = explain_masking(original, outcome.body, fmt, policy, recall=recall)
    assert isinstance(explanation, MaskingExplanation), explanation
    return explanation


POLICY = MaskPolicy(window_turns=2, exclude_tools=("read",))


@all_formats
def test_every_result_is_listed_with_the_plans_decision_or_reason(fmt):
    original, outcome = masked(fmt, POLICY)
    explanation = explained(fmt, original, outcome, POLICY)
    assert explanation.reasons_note is None
    assert (explanation.stage, explanation.frontier_turn) == ("masking", outcome.plan.frontier_turn)
    by_id = {r.call_id: r for r in explanation.results}
    assert [r.call_id for r in explanation.results] == [
        "nobody", "call_a", "call_b", "call_c", "call_d", "call_e", "call_f", "call_g"]
    assert {i: (r.decision, r.kept) for i, r in by_id.items()} == {
        "nobody": (None, "orphan"),
        "call_a": ("masked", None),
        "call_b": (None, "error"),
        "call_c": (None, "short"),
        "call_d": (None, "excluded"),
        "call_e": ("masked", None),
        "call_f": (None, "in_window"),
        "call_g": (None, "in_window"),
    }
    placeholder = render_placeholder(POLICY.placeholder_template, "call_a", "bash",
                                     len(LONG_OUTPUT + "\n(call_a)"))
    assert (by_id["call_a"].chars_before, by_id["call_a"].chars_after) == (
        len(LONG_OUTPUT + "\n(call_a)"), len(placeholder))
    assert by_id["call_a"].tool_name == "bash" and by_id["call_d"].tool_name == "read"
    # The same reasons as the plan's own count.
    kept = Counter(r.kept for r in explanation.unchanged)
    assert kept == +outcome.plan.kept


@all_formats
def test_clipped_results_are_named_clipped(fmt):
    """max_input_tokens: the results inside the window are clipped, and the
    view says so, with their sizes."""
    policy = MaskPolicy(window_turns=2, max_input_tokens=200, clip_head_chars=100,
                        clip_tail_chars=100, exclude_tools=("read",))
    original, outcome = masked(fmt, policy)
    assert outcome.plan.stage == "clipping"
    explanation = explained(fmt, original, outcome, policy)
    decisions = {r.call_id: r.decision for r in explanation.changed}
    assert decisions == {"call_a": "masked", "call_e": "masked", "call_f": "clipped",
                         "call_g": "clipped"}
    clipped = next(r for r in explanation.results if r.call_id == "call_g")
    assert clipped.kept is None and clipped.chars_after is not None
    assert clipped.chars_after < clipped.chars_before
    assert explanation.stage == "clipping"


@all_formats
def test_a_recalled_result_is_named_recalled(fmt):
    conversation = [
        Say("user", "Fix the bug."),
        Turn([Call("call_a")], text="turn 0"),
        Result("call_a", LONG_OUTPUT + "\n(call_a)"),
        Turn([Call("call_r", "mcp__obsmask__recall")], text="turn 1"),
        Result("call_r", RecallQuery("call_a").stub()),
        Turn([Call("call_b")], text="turn 2"),
        Result("call_b", LONG_OUTPUT + "\n(call_b)"),
    ]
    policy = MaskPolicy(window_turns=2)
    original, outcome = masked(fmt, policy, conversation, recall=True)
    explanation = explained(fmt, original, outcome, policy, recall=True)
    by_id = {r.call_id: r for r in explanation.results}
    assert by_id["call_a"].decision == "masked"
    assert by_id["call_r"].decision == "recalled"
    assert by_id["call_r"].chars_after == len(LONG_OUTPUT + "\n(call_a)")
    assert explanation.count("recalled") == 1


@all_formats
def test_without_the_settings_that_masked_it_the_diff_stands_alone(fmt):
    """Settings changed since (another window): the changes are still read
    from the two bodies (masked, clipped), the reasons are said to be
    unavailable, and no reason is invented."""
    policy = MaskPolicy(window_turns=2, max_input_tokens=200, clip_head_chars=100,
                        clip_tail_chars=100, exclude_tools=("read",))
    original, outcome = masked(fmt, policy)
    for other in (MaskPolicy(window_turns=5), MaskPolicy(enabled=False), None):
        explanation = explained(fmt, original, outcome, other)
        assert explanation.reasons_note is not None
        assert {r.call_id: r.decision for r in explanation.changed} == {
            "call_a": "masked", "call_e": "masked", "call_f": "clipped", "call_g": "clipped"}
        assert {r.call_id: r.kept for r in explanation.unchanged} == {
            "nobody": "orphan", "call_b": None, "call_c": None, "call_d": None}
        assert explanation.stage is None


@pytest.mark.parametrize(("original", "masked_body", "reason"), [
    (b"not json", b"{}", "not a OpenAI Chat Completions request"),
    (b'{"messages": []}', b"\xff", "not valid UTF-8"),
    (json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(),
     json.dumps({"messages": []}).encode(), "do not hold the same tool results"),
])
def test_bodies_that_cannot_be_compared_say_why(original, masked_body, reason):
    explanation = explain_masking(original, masked_body, CHAT, POLICY)
    assert isinstance(explanation, NotExplained) and reason in explanation.reason


@all_formats
def test_the_page_shows_each_result_the_reasons_the_comment_and_the_diff(fmt):
    original, outcome = masked(fmt, POLICY)
    explanation = explained(fmt, original, outcome, POLICY)
    record = MaskingRecord.of({"format": fmt.name, "stage": "masking", "frontier_turn": 3,
                               "window_turns": 2, "tool_turns": 6, "body_bytes_before": 100,
                               "body_bytes_after": 50, "tool_chars_before": 7,
                               "tool_chars_after": 5, "kept": {"x": 1}})
    comment = ["obsmask: masked 2 of 7 tool results: ...",
               "obsmask: provider reported 5,000 input tokens"]
    lines = masking_page(explanation, record, original.decode(), outcome.body.decode(), comment)
    page = page_text(lines)
    assert lines[0] == ViewLine("title", f"obsmask: masked request ({FORMAT_TITLES[fmt.name]})")
    assert "masked 2, clipped 0 of 7 tool results; stage masking" in page
    assert "frontier at tool turn 3 of 6" in page and "window 2 tool turns" in page
    assert "body 100 -> 50 bytes; tool result text 7 -> 5 chars" in page
    for call_id in ("call_a", "call_e"):
        assert any(line.kind == "text" and line.text.split()[:2] == ["masked", call_id]
                   for line in lines)
    for heading in ("in_window (2)", "error (1)", "short (1)", "excluded (1)", "orphan (1)"):
        assert f"  {heading}: " in page
    assert "    call_f, call_g" in page.splitlines()
    # The comment's lines stay lines of their own.
    assert "  " + comment[0] in page.splitlines() and "  " + comment[1] in page.splitlines()
    removed = [line.text for line in lines if line.kind == "removed"]
    added = [line.text for line in lines if line.kind == "added"]
    assert any("line 59: some ordinary tool output\\n(call_a)" in line for line in removed)
    assert any("Observation masquée" in line and "tool_call_id=call_a" in line for line in added)


def test_the_page_without_a_record_or_an_original_says_what_it_has():
    original, outcome = masked(CHAT, POLICY)
    explanation = explained(CHAT, original, outcome, None)
    page = page_text(masking_page(explanation, MaskingRecord(), original.decode(),
                                  outcome.body.decode()))
    assert f"body {len(original):,} -> {len(outcome.body):,} bytes" in page
    assert "the reasons are not available: no settings" in page
    assert "unknown (5): reason not available" in page
    page = page_text(masking_page(NotExplained("the flow holds no original request"),
                                  MaskingRecord(format="chat"), None, outcome.body.decode()))
    assert "The results cannot be listed: the flow holds no original request." in page
    assert "The request as it went out (the original is not in the flow):" in page
    assert "Observation masquée" in page and "---" not in page


def test_a_recorded_flow_from_another_version_is_read_as_far_as_it_goes():
    record = MaskingRecord.of({"format": 3, "stage": "masking", "frontier_turn": True,
                               "window_turns": "8"})
    assert record == MaskingRecord(stage="masking")


def test_truncation_marker_is_not_taken_for_a_mask():
    """A clipped text is told from a masked one by its marker alone when no
    plan is there to say so."""
    policy = MaskPolicy(window_turns=1, max_input_tokens=100, clip_head_chars=50,
                        clip_tail_chars=50)
    original, outcome = masked(CHAT, policy)
    explanation = explained(CHAT, original, outcome, None)
    clipped = [r for r in explanation.changed if r.decision == "clipped"]
    assert clipped and TRUNCATION_MARK not in original.decode()
