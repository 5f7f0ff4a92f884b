"""Re-fetches in the report (scripts/benchlib/report/: request_numbers.py,
refetches.py, totals.py, run.py): each conversation's section says which
requests made re-fetches, of which tools, and what they cost; the totals
at the top add them up; a wrong value in a flow file counts as absent."""

from __future__ import annotations

import json

import pytest

from obsmask_core.conversation.turns.wire_formats import CHAT
from obsmask_core.offline.cache.block_tokens import MessageTokens, load_encoder
from obsmask_core.offline.report.conversations import group_conversations
from obsmask_core.offline.report.flow_file import RecordedRequest
from obsmask_core.offline.report.policy_choice import PolicyChooser, UserSettings
from obsmask_core.offline.report.refetches import refetch_paragraph
from obsmask_core.offline.report.request_numbers import RequestNumbers, request_numbers
from obsmask_core.offline.report.run import conversation_report
from obsmask_core.offline.report.totals_section import totals, totals_table
from obsmask_core.shared.refetch_facts import RefetchFacts
from support.formats import convert, session


@pytest.fixture(scope="module")
def tokens() -> MessageTokens:
    return MessageTokens(load_encoder())


def numbers(number: int, refetches: RefetchFacts | None) -> RequestNumbers:
    return RequestNumbers(
        number=number, flow_number=number, action="masked", reason="", tokens_without=1_000,
        tokens_with=800, provider=None, frontier_turn=1, tool_turns=3, stage="masking",
        masked=1, clipped=0, masked_tokens_saved=150, replayed=None, refetches=refetches)


FIRST = RefetchFacts(new=1, new_calls=("r4",), new_tools=(("read_file", 1),),
                     result_tokens=300, extra_turns=1, in_conversation=1, guarded_results=1)
SECOND = RefetchFacts(new=2, new_calls=("r6", "b6"), new_tools=(("bash", 1), ("read_file", 1)),
                      result_tokens=50, extra_turns=0, in_conversation=3, guarded_results=2)
# A later request carries the conversation's count, and no new re-fetch.
LATER = RefetchFacts(in_conversation=3, guarded_results=2)
CONVERSATION = [numbers(1, None), numbers(2, FIRST), numbers(3, SECOND), numbers(4, LATER)]


def test_the_section_names_the_requests_their_calls_tools_and_what_they_cost():
    assert refetch_paragraph(CONVERSATION) == (
        "Re-fetches: 3 call(s) the model made again after obsmask had masked the result of "
        "the same earlier call (bash 1, read_file 2), in request 2: r4; request 3: r6, b6. "
        "They cost 350 tokens of results fetched again and 1 extra model turn(s) (answers "
        "that made nothing else); the re-fetch guard kept 5 result(s), summed over the "
        "requests.")


def test_a_conversation_without_refetches_says_nothing_of_them():
    assert refetch_paragraph([numbers(1, None), numbers(2, None)]) is None


def test_the_totals_at_the_top_add_up_each_refetch_once_and_its_cost():
    figures = totals(flows=5, conversations=1, requests=CONVERSATION, cuts=[])
    assert (figures.refetches, figures.refetch_result_tokens, figures.refetch_extra_turns,
            figures.refetch_guarded_results) == (3, 350, 1, 5)
    rows = {row[0]: row[1] for row in totals_table(figures).rows}
    assert (rows["Re-fetches"], rows["Re-fetched result tokens"], rows["Extra model turns"],
            rows["Results kept by the re-fetch guard"]) == (3, 350, 1, 5)
    none = {row[0]: row[1] for row in totals_table(totals(
        flows=1, conversations=1, requests=[numbers(1, None)], cuts=[])).rows}
    assert none["Re-fetches"] == 0


def recorded(number: int, **masking: object) -> RecordedRequest:
    body = json.dumps({"model": "m", "messages": convert(CHAT, session(3))}).encode()
    return RecordedRequest(number, "flows.mitm", "/v1/chat/completions", CHAT, body, body,
                           {"action": "masked", "conversation": "c-1", **masking})


@pytest.mark.parametrize("value", ["r4", ["r4"], 7, {"new": "1", "result_tokens": -3}])
def test_a_wrong_refetch_value_in_a_flow_file_counts_as_absent(tokens, value):
    [group] = group_conversations([recorded(1, refetches=value)])
    read = request_numbers(group.requests[0], tokens, None)
    assert not read.refetches
    assert refetch_paragraph([read]) is None
    assert totals(flows=1, conversations=1, requests=[read], cuts=[]).refetches == 0


def test_the_recorded_refetches_reach_the_conversation_s_section(tokens, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)  # no mitm.toml: the built-in settings
    facts = {"new": 1, "new_calls": ["call_2_0"], "new_tools": {"bash": 1},
             "result_tokens": 120, "extra_turns": 1, "in_conversation": 1,
             "guarded_results": 0}
    [group] = group_conversations([recorded(1), recorded(2, refetches=facts)])
    report = conversation_report(group, PolicyChooser(UserSettings()), tokens)
    assert report.requests[1].refetches == RefetchFacts.read(facts)
    assert any(paragraph.startswith("Re-fetches: 1 call(s)") and "request 2: call_2_0" in
               paragraph and "120 tokens" in paragraph for paragraph in report.section.paragraphs)
