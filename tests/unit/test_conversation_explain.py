"""What the content view says of a masked request (``conversation/view/explain.py``),
in all three wire formats: every result is listed once, with what the diff
of the two bodies shows and why the plan kept it; a plan that does not give
the masked body back (settings changed) leaves the diff's facts and says the
reasons are not available; the page holds the original text and the
placeholder, diffed item by item (one small diff per changed item, however
long the request), or whole within a bound when the items do not line up."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest

from obsmask_core.conversation.billing.last_seen import Recorded
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.settings.policy import MaskPolicy, render_placeholder
from obsmask_core.conversation.settings.routes import FORMAT_TITLES
from obsmask_core.conversation.turns.wire_formats import CHAT, WireFormat
from obsmask_core.conversation.view.explain import (
    MaskingExplanation,
    NotExplained,
    explain_masking,
)
from obsmask_core.conversation.view.masking_page import MaskingRecord, masking_page
from obsmask_core.shared.recall_text import RecallQuery
from obsmask_core.shared.truncation import TRUNCATION_MARK
from obsmask_core.shared.view_text import DIFF_WORK, ViewLine, page_text
from support.chat import LONG_OUTPUT, body, conversation
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
    # The counts add up: 2 changed + 6 kept = 7 results + 1 orphan.
    assert "masked 2, clipped 0 of 7 tool results and 1 orphan; stage masking" in page
    assert "Masked, clipped or recalled (2):" in page and "Kept as they came (6)" in page
    assert ("frontier: the first 3 of 6 tool turns may be masked; window 2 tool turns"
            in page.splitlines())
    assert "body 100 -> 50 bytes on the wire; tool result text 7 -> 5 chars" in page
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
    assert f"body {len(original):,} -> {len(outcome.body):,} bytes decoded" in page
    assert "frontier: n/a" in page.splitlines()
    assert "the reasons are not available: no settings" in page
    assert "unknown (5): reason not available" in page
    page = page_text(masking_page(NotExplained("the flow holds no original request"),
                                  MaskingRecord(format="chat"), None, outcome.body.decode()))
    assert "The results cannot be listed: the flow holds no original request." in page
    assert "The request as it went out (the original is not in the flow):" in page
    assert "Observation masquée" in page and "---" not in page


def test_the_page_shows_the_cache_the_ledger_predicted_beside_the_provider_s_report():
    """The prediction is an estimate: a reader judges it by the report, in
    the same terms (Anthropic's input is its three figures added up)."""
    original, outcome = masked(CHAT, POLICY)
    explanation = explained(CHAT, original, outcome, POLICY)
    facts: dict[str, object] = {
        "format": "anthropic",
        "bill": {"cache": "breakpoints", "predicted": {
            "input_tokens": 10_000, "cache_read_tokens": 8_000, "cache_write_tokens": 1_500}},
        "provider_usage": {"input_tokens": 300, "cached_input_tokens": 7_700,
                           "cache_creation_input_tokens": 1_800}}
    page = page_text(masking_page(explanation, MaskingRecord.of(facts), original.decode(),
                                  outcome.body.decode())).splitlines()
    assert ("cache (breakpoints) predicted: 8,000 read from the cache, 1,500 written to it, "
            "of 10,000 input tokens (estimated)") in page
    assert ("cache reported by the provider: 7,700 read from the cache, 1,800 written to it, "
            "of 9,800 input tokens") in page
    del facts["provider_usage"]
    not_yet = page_text(masking_page(NotExplained("the flow holds no original request"),
                                     MaskingRecord.of(facts), None, outcome.body.decode()))
    assert "cache (breakpoints) predicted: 8,000 read from the cache" in not_yet
    assert ("cache reported by the provider: none (the answer has not reported its cache)"
            in not_yet.splitlines())
    unpriced = page_text(masking_page(explanation, MaskingRecord(format="chat"),
                                      original.decode(), outcome.body.decode()))
    assert "cache" not in unpriced.split("Masked, clipped or recalled")[0]


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


@all_formats
def test_the_diff_is_made_item_by_item_each_hunk_headed_by_its_place_and_call_id(fmt, compared):
    original, outcome = masked(fmt, POLICY)
    explanation = explained(fmt, original, outcome, POLICY)
    compared.clear()
    lines = masking_page(explanation, MaskingRecord(), original.decode(), outcome.body.decode())
    items = json.loads(original)[fmt.list_member]
    places = {call_id: next(n for n, item in enumerate(items)
                            if f"\\n({call_id})" in json.dumps(item))
              for call_id in ("call_a", "call_e")}
    assert [line.text for line in lines if line.kind == "hunk"] == [
        f"@@ {fmt.list_member}[{places[call_id]}] ({call_id}) @@"
        for call_id in ("call_a", "call_e")]
    assert [line.text for line in lines if line.kind == "heading"][-2:] == [
        "--- original request", "+++ masked request"]
    # One small comparison per changed item, none of the whole body.
    assert len(compared) == 2 and all(max(sides) < 20 for sides in compared)
    page = page_text(lines)
    assert "The items that changed, in the original request (-) and as they went out (+)" in page
    assert ([r.location[0] for r in explanation.changed]
            == [places["call_a"], places["call_e"]])


def test_a_thousand_masked_results_are_diffed_one_item_at_a_time(compared):
    """However long the request, the page compares each changed item on its
    own: as many small comparisons as items masked, their work far below
    the bound, and each hunk covers one item (the whole body compared at
    once took seconds, 53 s at 5,000 results of 2,000 chars)."""
    original = body(conversation(1_000))
    policy = MaskPolicy(window_turns=1)
    outcome = mask_request_body(original, policy, CHAT)
    assert isinstance(outcome, Masked) and outcome.plan.masked == 999
    explanation = explained(CHAT, original, outcome, policy)
    compared.clear()
    lines = masking_page(explanation, MaskingRecord(), original.decode(), outcome.body.decode())
    assert compared == [(5, 5)] * 999
    assert sum(a * b for a, b in compared) < DIFF_WORK / 100
    hunks = [n for n, line in enumerate(lines) if line.kind == "hunk"]
    assert [lines[n].text for n in hunks] == [
        f"@@ messages[{2 * turn + 3}] (call_{turn}_0) @@" for turn in range(999)]
    for start, end in zip(hunks, [*hunks[1:], len(lines)], strict=True):
        body_lines = lines[start + 1:end]
        assert [line.kind for line in body_lines] == [
            "context", "context", "context", "removed", "added", "context"]
        call_id = lines[start].text.split("(")[1].rstrip(") @")
        assert f'"tool_call_id": "{call_id}"' in body_lines[2].text
        assert f"\\n({call_id})" in body_lines[3].text and call_id in body_lines[4].text


def test_bodies_whose_items_do_not_line_up_are_diffed_whole_within_the_bound(compared):
    """NotExplained: no items to pair, so the two bodies are compared
    whole, unless that would pass the bound: then one sentence says the
    diff is left out, and difflib is not run at all."""
    small = json.dumps({"messages": [{"role": "user", "content": "x"}]})
    page = page_text(masking_page(
        NotExplained("the two bodies do not hold the same tool results"),
        MaskingRecord(format="chat"), small, json.dumps({"messages": []})))
    assert "The results cannot be listed: the two bodies do not hold the same tool results." in page
    assert "--- original request" in page and '-      "content": "x"' in page
    assert len(compared) == 1
    compared.clear()
    big = body(conversation(400))
    page = page_text(masking_page(NotExplained("the two bodies do not hold the same tool results"),
                                  MaskingRecord(format="chat"), big.decode(),
                                  body(conversation(399)).decode()))
    assert compared == []
    assert "(the diff is left out: the bodies are too large to compare here, " in page
    assert "--- original request" not in page


@pytest.mark.parametrize(("frontier", "turns", "said"), [
    (17, 19, "frontier: the first 17 of 19 tool turns may be masked"),
    (17, None, "frontier: the first 17 tool turns may be masked"),
    (0, 3, "frontier: none of the 3 tool turns may be masked"),
    (0, None, "frontier: no tool turn may be masked"),
])
def test_the_frontier_is_told_as_the_count_of_tool_turns_before_it(frontier, turns, said):
    """The plan's frontier is the index of the first tool turn it keeps:
    as many turns come before it, and only those may be masked."""
    original, outcome = masked(CHAT, POLICY)
    explanation = explained(CHAT, original, outcome, POLICY)
    record = MaskingRecord(format="chat", frontier_turn=frontier, tool_turns=turns)
    lines = page_text(masking_page(explanation, record, original.decode(),
                                   outcome.body.decode())).splitlines()
    assert said in lines


def test_without_orphans_the_header_counts_the_tool_results_alone():
    conversation_events = [event for event in events()
                           if not (isinstance(event, Result) and event.call_id == "nobody")]
    original, outcome = masked(CHAT, POLICY, conversation_events)
    explanation = explained(CHAT, original, outcome, POLICY)
    page = page_text(masking_page(explanation, MaskingRecord(), original.decode(),
                                  outcome.body.decode()))
    assert "masked 2, clipped 0 of 7 tool results; stage masking" in page
    assert "orphan" not in page


def test_other_members_that_differ_are_diffed_as_one_part_after_the_items():
    """Masking leaves the members besides the list alone; a body that went
    out with another one (another tool's doing) shows it, after the items,
    NaN and all."""
    original = json.dumps({"model": "m", "temperature": float("nan"),
                           "messages": json.loads(request(CHAT, events()))["messages"]}).encode()
    outcome = mask_request_body(original, POLICY, CHAT)
    assert isinstance(outcome, Masked)
    went_out = outcome.body.replace(b'"model": "m"', b'"model": "n"')
    explanation = explained(CHAT, original, dataclasses.replace(outcome, body=went_out), None)
    assert [part.label for part in explanation.parts][-1] == (
        "the request's members besides messages")
    lines = masking_page(explanation, MaskingRecord(), original.decode(), went_out.decode())
    assert [line.text for line in lines if line.kind == "hunk"][-1] == (
        "@@ the request's members besides messages @@")
    assert [line.text for line in lines if line.kind in ("removed", "added", "context")][-5:] == [
        " {", '-  "model": "m",', '+  "model": "n",', '   "temperature": NaN', " }"]


def test_a_request_planned_cold_is_explained_with_the_cold_ends_its_flow_recorded():
    """A request that came back after its cache's lifetime was masked with
    a cold end (``last_seen``): planned again with the cold ends its bill
    recorded, it gives the same body and each result its reason; planned
    warm, it does not, and the view says so."""
    policy = MaskPolicy(window_turns=1, min_free_percent=80, price_model="anthropic",
                        allowance_percent=2, cold_after_seconds=360)
    outputs = ["m" * 3000] * 6 + ["B" * 20_000]
    events: list[Event] = [Say("user", "u" * 8000)]
    for turn, output in enumerate(outputs[:5]):
        events += [Turn([Call(f"c{turn}", "bash")], text="t" * 2000), Result(f"c{turn}", output)]
    original = request(CHAT, events)
    cold_end = len(convert(CHAT, events))
    outcome = mask_request_body(original, policy, CHAT, visit=Recorded(frozenset({cold_end})))
    assert isinstance(outcome, Masked) and outcome.plan.masked == 4
    assert outcome.plan.bill is not None and outcome.plan.bill.cold_ends == (cold_end,)
    record = MaskingRecord.of({"bill": {"cold_ends": [cold_end]}})
    assert record.cold_ends == {cold_end}
    replanned = explain_masking(original, outcome.body, CHAT, policy, table=record.table())
    assert isinstance(replanned, MaskingExplanation) and replanned.reasons_note is None
    warm = explain_masking(original, outcome.body, CHAT, policy)
    assert isinstance(warm, MaskingExplanation) and warm.reasons_note is not None
    assert "settings changed" in warm.reasons_note
