"""Recall of a masked conversation result (``conversation/masking/recall.py`` and
the rewrite): the stub the recall tool answered with is replaced, on the way
to the provider, by the original text of the named result taken from the
same request; the same request always gives the same bytes; the recalled
result is masked again only once it leaves the window; and with recall off
nothing of this happens."""

from __future__ import annotations

import json

import pytest

from obsmask_core.conversation.body.request_text import loads
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.settings.policy import DEFAULT_PLACEHOLDER_TEMPLATE, MaskPolicy
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.shared.recall_text import RecallQuery
from support.formats import (
    FORMAT_IDS,
    FORMATS,
    Call,
    Event,
    Result,
    Turn,
    convert,
    result_values,
    session,
    skeleton,
    text_of,
)

POLICY = MaskPolicy(window_turns=1)
RECALL_TOOL = "mcp__obsmask__recall"


def request(fmt: WireFormat, events: list[Event]) -> bytes:
    return json.dumps({"model": "m", fmt.list_member: convert(fmt, events)}).encode()


def outgoing(fmt: WireFormat, events: list[Event], policy: MaskPolicy = POLICY,
             recall: bool = True) -> list[object]:
    outcome = mask_request_body(request(fmt, events), policy, fmt, recall=recall)
    assert isinstance(outcome, Masked), outcome
    items = loads(outcome.body.decode())[fmt.list_member]
    assert isinstance(items, list)
    return items


def text_for(fmt: WireFormat, items: list[object], call_id: str) -> str | None:
    values = [value for found, value in result_values(fmt, items) if found == call_id]
    assert len(values) == 1
    return text_of(values[0])


def recalling(events: list[Event], call_id: str, query: RecallQuery) -> list[Event]:
    """The session, then a turn that calls the recall tool, answered with its stub."""
    return [*events, Turn([Call(call_id, RECALL_TOOL)]), Result(call_id, query.stub())]


def original(events: list[Event], call_id: str) -> str:
    for event in events:
        if isinstance(event, Result) and event.call_id == call_id:
            assert isinstance(event.content, str)
            return event.content
    raise AssertionError(call_id)


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_a_recall_stub_becomes_the_original_text_byte_for_byte(fmt):
    """The recall's tool result reaches the provider holding exactly the text
    of the result it names, taken from the same request, while that original
    itself stays masked."""
    events = recalling(session(4), "call_r", RecallQuery("call_0_0"))
    items = outgoing(fmt, events)
    assert text_for(fmt, items, "call_r") == original(events, "call_0_0")
    assert text_for(fmt, items, "call_0_0") != original(events, "call_0_0")


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_only_the_recall_result_and_the_masked_results_change(fmt):
    """The invariants of masking hold with a recall: the same items in the same
    order, every id, call and field as the client sent it; only tool result
    values differ."""
    events = recalling(session(4), "call_r", RecallQuery("call_1_0"))
    sent = convert(fmt, events)
    assert skeleton(fmt, outgoing(fmt, events)) == skeleton(fmt, sent)


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_the_same_request_gives_the_same_bytes_every_time(fmt):
    """The replacement depends on the request alone: sending it twice (a
    retry, another proxy of a fleet) gives identical bodies."""
    events = recalling(session(5), "call_r", RecallQuery("call_2_0", 3, 9))
    first = mask_request_body(request(fmt, events), POLICY, fmt, recall=True)
    second = mask_request_body(request(fmt, events), POLICY, fmt, recall=True)
    assert isinstance(first, Masked) and isinstance(second, Masked)
    assert first.body == second.body


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_the_next_request_carries_the_recalled_result_unchanged_while_in_the_window(fmt):
    """A recalled result is pinned: in the next request (one more tool turn,
    window of 2) it goes out with the same bytes as in the first."""
    policy = MaskPolicy(window_turns=2)
    events = recalling(session(4), "call_r", RecallQuery("call_0_0"))
    later = [*events, Turn([Call("call_x")]), Result("call_x", "short answer x")]
    first = text_for(fmt, outgoing(fmt, events, policy), "call_r")
    second = text_for(fmt, outgoing(fmt, later, policy), "call_r")
    assert first == second == original(events, "call_0_0")


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_a_recalled_result_is_masked_again_when_it_leaves_the_window(fmt):
    """Once its turn is out of the window, the recalled result is masked like
    any other: its placeholder names the recall call and counts the
    recalled text's characters."""
    events = recalling(session(3), "call_r", RecallQuery("call_0_0"))
    later = [*events, Turn([Call("call_x")]), Result("call_x", "y" * 3000)]
    masked = text_for(fmt, outgoing(fmt, later), "call_r")
    assert masked is not None
    assert masked.startswith("[Observation masquée") and "tool_call_id=call_r" in masked
    assert f"chars={len(original(events, 'call_0_0'))}" in masked


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_a_line_range_and_a_pattern_give_that_part_of_the_original(fmt):
    """A recall for lines 2-4 gets those lines; one with a pattern gets the
    numbered lines that hold it."""
    events = recalling(session(4), "call_r", RecallQuery("call_1_0", 2, 4))
    events = recalling(events, "call_s", RecallQuery("call_1_0", pattern="line 1"))
    items = outgoing(fmt, events, MaskPolicy(window_turns=2))
    lines = original(events, "call_1_0").splitlines(keepends=True)
    assert text_for(fmt, items, "call_r") == "".join(lines[1:4])
    assert text_for(fmt, items, "call_s") == "".join(
        f"{n}: {line.rstrip()}\n" for n, line in enumerate(lines, 1) if "line 1" in line)


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_a_recall_of_a_result_no_longer_in_the_request_says_so(fmt):
    """When the client compacted its history and the named result is gone,
    the stub becomes a plain note saying so, never an error."""
    events = recalling(session(3), "call_r", RecallQuery("call_gone"))
    text = text_for(fmt, outgoing(fmt, events), "call_r")
    assert text is not None
    assert "call_gone" in text and "no longer in this conversation" in text


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_with_recall_off_the_stub_and_the_placeholders_stay_plain(fmt):
    """Recall off: the stub goes out as the client sent it, and a placeholder
    is the specification's, with no recall hint."""
    events = recalling(session(4), "call_r", RecallQuery("call_0_0"))
    items = outgoing(fmt, events, recall=False)
    assert text_for(fmt, items, "call_r") == RecallQuery("call_0_0").stub()
    masked = text_for(fmt, items, "call_0_0")
    assert masked == DEFAULT_PLACEHOLDER_TEMPLATE.format(
        tool_call_id="call_0_0", tool_name="bash",
        original_chars=len(original(events, "call_0_0")), recall="")
    assert "recall" not in masked


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_with_recall_on_a_placeholder_says_how_to_recall_its_result(fmt):
    """Recall on: the placeholder ends with "; recall id=" and the call's id."""
    masked = text_for(fmt, outgoing(fmt, session(3)), "call_0_0")
    assert masked is not None and masked.endswith("; recall id=call_0_0]")


def test_a_held_out_conversation_still_gets_its_recalled_text():
    """A conversation of the holdout group is never masked, but a stub in it
    still becomes the text it asks for (the model cannot use a stub)."""
    policy = MaskPolicy(window_turns=1, holdout_percent=100)
    fmt = FORMATS[0]
    events = recalling(session(3), "call_r", RecallQuery("call_0_0"))
    items = outgoing(fmt, events, policy)
    assert text_for(fmt, items, "call_r") == original(events, "call_0_0")
    assert text_for(fmt, items, "call_0_0") == original(events, "call_0_0")


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_a_result_of_another_tool_that_quotes_a_stub_is_left_alone(fmt):
    """Only the recall tool's results are read as stubs: a grep whose output
    quotes one goes out as the client sent it."""
    quoted = f"notes.md:3: the tool answers {RecallQuery('call_0_0').stub()} then"
    events = [*session(3), Turn([Call("call_g", "bash")]), Result("call_g", quoted)]
    assert text_for(fmt, outgoing(fmt, events), "call_g") == quoted


def test_a_call_id_reused_by_several_results_gets_no_recall_hint():
    """A client that reuses call_0 in every turn: a recall could not tell
    which result it means, so their placeholders carry no hint (the spec's
    placeholder), while a unique id keeps its hint."""
    fmt = FORMATS[0]
    events: list[Event] = [*session(2)]
    for turn in range(3):
        events += [Turn([Call("call_0")]), Result("call_0", f"result {turn} " + "x" * 3000)]
    items = outgoing(fmt, events)
    placeholders = [text_of(value) for call_id, value in result_values(fmt, items)
                    if call_id == "call_0"][:2]
    assert all(p is not None and p.startswith("[Observation") for p in placeholders)
    assert not any("recall id" in str(p) for p in placeholders)
    assert str(text_for(fmt, items, "call_0_0")).endswith("; recall id=call_0_0]")


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_a_recalled_result_is_never_clipped_by_the_budget(fmt):
    """The second stage (max_input_tokens) clips results in the window, but
    not the one the model just asked for whole: clipping it would send the
    model back to recall it again."""
    policy = MaskPolicy(window_turns=2, max_input_tokens=500, clip_head_chars=100,
                        clip_tail_chars=100)
    events = recalling(session(4), "call_r", RecallQuery("call_0_0"))
    assert text_for(fmt, outgoing(fmt, events, policy), "call_r") == original(events, "call_0_0")


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_a_recall_of_an_empty_result_says_it_is_empty(fmt):
    """An empty original would make an empty text block, which providers
    refuse: the recall result says the result is empty instead."""
    events = [*session(2), Turn([Call("call_e")]), Result("call_e", "")]
    events = recalling(events, "call_r", RecallQuery("call_e"))
    text = text_for(fmt, outgoing(fmt, events, MaskPolicy(window_turns=1)), "call_r")
    assert text == "[obsmask recall id=call_e: the result is empty]"
