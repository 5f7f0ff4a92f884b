"""A body grown from a kept request whose read proved where its list closes
is read without parsing it whole: its added items alone, the older items
and other members only when something asks for them. What goes out must
be what masking the body anew gives, and the body is read whole as soon
as a replacement must be checked."""

from __future__ import annotations

import itertools
import json
from unittest import mock

import orjson
import pytest

from obsmask_core.conversation.body import quick_body
from obsmask_core.conversation.body.request_body import ExactBody
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_read_body
from obsmask_core.conversation.reuse import grown_body, previous_requests
from obsmask_core.conversation.reuse.grown_body import GrownBody, GrownItems
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import CHAT, RESPONSES
from support.chat import body, conversation, tool_result, tool_turn
from support.chat_masking import ANSWER_AND_REPLY as ANSWER
from support.chat_masking import LAST_TURN_POLICY as POLICY
from support.chat_masking import assert_goes_out_as_read_exactly
from support.formats import session, to_responses


@pytest.fixture(autouse=True)
def many_conversations(monkeypatch: pytest.MonkeyPatch) -> None:
    """As with many conversations going on: no parsed body is kept from one
    request to the next (``previous_requests``), so a grown body is read
    from its added items alone on every request, not from a kept document."""
    monkeypatch.setattr(previous_requests, "DOCUMENT_CONVERSATIONS", 0)


@pytest.fixture
def masker() -> Masker:
    """What masking keeps between requests: new for each test, so what one
    test kept cannot decide another's."""
    return Masker(POLICY)


def parsed_while(action):
    """The outcome, and the length of every body orjson parsed meanwhile."""
    with mock.patch.object(quick_body.orjson, "loads", wraps=orjson.loads) as loads, \
            mock.patch.object(grown_body.orjson, "loads", wraps=orjson.loads) as whole:
        outcome = action()
    return outcome, [len(call.args[0]) for call in (*loads.call_args_list,
                                                    *whole.call_args_list)]


def test_a_conversations_second_request_is_masked_from_what_it_adds_alone(masker):
    """The first request's read cannot prove where its list closes, but the
    check of its masked body does (whole values replaced by whole values
    before that point, the same bytes after it); the second adds an answer
    and a reply, plans as the first, and goes out as the first's masked
    body with its added bytes: only those are parsed."""
    requests = [body(conversation(turns=3) + ANSWER * n) for n in range(3)]
    assert isinstance(masker.mask(requests[0], CHAT), Masked)
    for before, request in itertools.pairwise(requests):
        outcome, parsed = parsed_while(lambda r=request: masker.mask(r, CHAT))
        assert isinstance(outcome, Masked) and outcome.reused
        added = len(request) - len(before)
        assert parsed and max(parsed) == added + 1  # "[" + the items without their comma + "]"
        assert_goes_out_as_read_exactly(request, outcome, POLICY)


def test_after_a_first_request_left_unchanged_the_second_is_read_whole():
    """Nothing masked, nothing checked: nothing proved where the first
    request's list closes, and the second is read whole (which proves it)."""
    policy = MaskPolicy(window_turns=10, price_model="none", min_free_percent=0)
    masker = Masker(policy)
    first, second = body(conversation(turns=3)), body(conversation(turns=3) + ANSWER)
    assert not isinstance(masker.mask(first, CHAT), Masked)
    outcome, parsed = parsed_while(lambda: masker.mask(second, CHAT))
    assert max(parsed) > len(second)  # with the marker that proves where its list closes
    assert_goes_out_as_read_exactly(second, outcome, policy)


def test_with_a_holdout_a_grown_request_is_placed_from_what_it_adds_alone():
    """The conversation's name and holdout bucket come from its first user
    message, which the kept request holds: they are kept with it, and the
    grown request is not read whole to find them (this conversation's
    bucket is not under 1: it is masked)."""
    policy = MaskPolicy(window_turns=1, price_model="none", min_free_percent=0,
                        holdout_percent=1)
    masker = Masker(policy)
    requests = [body(conversation(turns=3) + ANSWER * n) for n in range(3)]
    for request in requests[:2]:
        masker.mask(request, CHAT)
    outcome, parsed = parsed_while(lambda: masker.mask(requests[2], CHAT))
    assert max(parsed) == len(requests[2]) - len(requests[1]) + 1
    assert isinstance(outcome, Masked) and not outcome.plan.held_out
    assert_goes_out_as_read_exactly(requests[2], outcome, policy)


def test_a_grown_request_with_a_replacement_no_parse_proved_is_read_whole_and_checked(masker):
    """A new tool turn moves the window: one more result is masked, one that
    came in the first request, which had nothing to mask (so nothing
    checked it and proved its place): it must be spliced and checked, so
    the body is read whole."""
    first, second = conversation(turns=1), conversation(turns=1) + ANSWER
    third = [*second, tool_turn("call_new"), tool_result("call_new")]
    for request in (first, second):
        assert not isinstance(masker.mask(body(request), CHAT), Masked)
    outcome, parsed = parsed_while(lambda: masker.mask(body(third), CHAT))
    assert isinstance(outcome, Masked) and not outcome.reused
    assert len(body(third)) in parsed
    assert_goes_out_as_read_exactly(body(third), outcome, POLICY)


def test_a_conversation_goes_on_from_grown_bodies_as_masked_anew_at_every_request(masker):
    messages = conversation(turns=2)
    for turn in range(6):
        messages = [*messages, *ANSWER, tool_turn(f"call_{turn}_x"), tool_result(f"call_{turn}_x")]
        request = body(messages)
        assert_goes_out_as_read_exactly(request, masker.mask(request, CHAT), POLICY)


# The items --------------------------------------------------------------------


def items_of(kept: list[object], added: list[object]) -> tuple[bytes, GrownItems]:
    new = json.dumps({"messages": kept + added, "model": "m"}).encode()
    return new, GrownItems(new, "messages", len(kept), added)


def test_the_added_items_are_given_without_reading_the_body():
    _, items = items_of([1, 2], [3, 4])
    assert len(items) == 4
    assert (items[2], items[3], items[-1]) == (3, 4, 4)
    assert items[2:] == [3, 4] and items[3:] == [4] and items[5:] == []
    assert items.document is None


def test_an_older_item_or_the_whole_list_reads_the_body_once():
    new, items = items_of([1, {"a": [2]}], [3])
    assert items[1] == {"a": [2]} and items[-3] == 1
    document = items.document
    assert document == json.loads(new)
    assert list(items) == [1, {"a": [2]}, 3] and items[:2] == [1, {"a": [2]}]
    assert items.document is document


def test_a_body_that_does_not_read_as_its_kept_and_added_items_is_refused():
    new = json.dumps({"messages": [1, 2, 3]}).encode()
    with pytest.raises(ValueError):
        GrownItems(new, "messages", 1, [3]).read_document()  # three items, not two
    with pytest.raises(ValueError):
        GrownItems(new, "messages", 2, [4]).read_document()  # the added item differs


def test_bytes_that_are_not_a_comma_and_whole_items_are_not_read_as_grown():
    old = b'{"messages": [1], "model": "m"}'
    end = old.index(b"]")
    for inserted in (b"2", b',{"a":', b"],[3", b", [" * 600 + b"]" * 600):
        new = old[:end] + inserted + old[end:]
        assert GrownBody.read(new, "messages", 1, end, end + len(inserted)) is None


RESPONSES_ANSWER = [
    {"type": "message", "role": "assistant",
     "content": [{"type": "output_text", "text": "It is fixed."}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Thanks."}]},
]


def test_a_responses_conversations_next_request_is_masked_from_what_it_adds_alone(masker):
    """The Responses index resumes too (its list ending between answers, no
    run of calls open): the next request of the conversation, an answer and
    a reply added, goes out as the previous one's masked body with its
    added bytes, only those parsed, and as masking it anew would send it."""
    items = to_responses(session(3))
    requests = [json.dumps({"model": "m", "input": items + RESPONSES_ANSWER * n}).encode()
                for n in range(3)]
    assert isinstance(masker.mask(requests[0], RESPONSES), Masked)
    for before, request in itertools.pairwise(requests):
        outcome, parsed = parsed_while(lambda r=request: masker.mask(r, RESPONSES))
        assert isinstance(outcome, Masked) and outcome.reused
        assert parsed and max(parsed) == len(request) - len(before) + 1
        anew = mask_read_body(ExactBody.read(request, "input"), POLICY, RESPONSES)
        assert isinstance(anew, Masked) and outcome.body == anew.body
