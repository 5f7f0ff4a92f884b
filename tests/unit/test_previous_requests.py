"""A request that only adds items to the conversation's previous one goes
out as the previous masked body with the new items' bytes, not searched,
spliced and parsed again; anything else about it, and it is masked anew."""

from __future__ import annotations

import json
from unittest import mock

import orjson
import pytest

from obsmask_core.conversation.body.quick_body import QuickBody, loads_marking_end
from obsmask_core.conversation.body.request_body import ExactBody
from obsmask_core.conversation.masking import checked_splice, rewrite
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_read_body
from obsmask_core.conversation.planning import planner
from obsmask_core.conversation.reuse import previous_requests as previous_requests_module
from obsmask_core.conversation.reuse.previous_requests import (
    DOCUMENT_AFTER_REQUESTS,
    DOCUMENT_CONVERSATIONS,
    DOCUMENT_IDLE_SECONDS,
    PreviousRequest,
    PreviousRequests,
)
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns import tool_turns
from obsmask_core.conversation.turns.tool_turns import IndexedItems
from obsmask_core.conversation.turns.turn_model import ToolResult, ToolTurnIndex
from obsmask_core.conversation.turns.wire_formats import CHAT
from support.chat import body, conversation, user
from support.chat_masking import ANSWER_AND_REPLY as ANSWER
from support.chat_masking import LAST_TURN_POLICY as POLICY
from support.chat_masking import assert_goes_out_as_read_exactly


@pytest.fixture
def masker() -> Masker:
    """What masking keeps between requests: new for each test, so what one
    test kept cannot decide another's."""
    return Masker(POLICY)


def masked_anew(request: bytes) -> bytes:
    outcome = mask_read_body(ExactBody.read(request, "messages"), POLICY, CHAT)
    assert isinstance(outcome, Masked)
    return outcome.body


def checks_while(action):
    with mock.patch.object(checked_splice, "verify", wraps=checked_splice.verify) as verify:
        outcome = action()
    return outcome, verify.call_count


def test_a_request_that_only_adds_items_reuses_the_previous_masked_body_without_a_check(masker):
    first = body(conversation(turns=3))
    grown = body(conversation(turns=3) + ANSWER)
    assert isinstance(masker.mask(first, CHAT), Masked)
    outcome, checks = checks_while(lambda: masker.mask(grown, CHAT))
    assert isinstance(outcome, Masked)
    assert checks == 0
    assert outcome.body == masked_anew(grown)
    assert len(outcome.plan.decisions) == 2
    # What the frontier's checkpoint keeps for the next request: orjson's
    # writing of all the items, made from the previous one's.
    assert outcome.plan.items_written == orjson.dumps(conversation(turns=3) + ANSWER)[:-1]


def test_a_retry_of_the_same_body_goes_out_as_it_did_the_first_time_without_a_check(masker):
    request = body(conversation(turns=4))
    first = masker.mask(request, CHAT)
    again, checks = checks_while(lambda: masker.mask(bytes(request), CHAT))
    assert isinstance(first, Masked) and isinstance(again, Masked)
    assert checks == 0
    assert again.body == first.body == masked_anew(request)
    assert again.plan == first.plan
    assert again.reused and not first.reused


def test_a_retry_is_known_as_one_even_when_it_also_grew_from_a_later_request(masker):
    """A kept request with the same bytes comes before the most recent one
    the body grew from (whose plan differs: it would be masked anew)."""
    longer, shorter = body(conversation(turns=4)), body(conversation(turns=2))
    first = masker.mask(longer, CHAT)
    masker.mask(shorter, CHAT)  # kept after it; the longer grew from it
    again, checks = checks_while(lambda: masker.mask(bytes(longer), CHAT))
    assert isinstance(again, Masked) and isinstance(first, Masked)
    assert checks == 0
    assert again.body == first.body


def test_the_same_bytes_under_another_policy_are_planned_anew(masker):
    request = body(conversation(turns=4))
    masker.mask(request, CHAT)
    wider = MaskPolicy(window_turns=2, price_model="none", min_free_percent=0)
    outcome = Masker(wider).mask(request, CHAT)
    assert isinstance(outcome, Masked) and not outcome.reused
    assert len(outcome.plan.decisions) == 2


def test_a_request_whose_plan_changed_is_spliced_where_the_last_check_proved_without_a_check(
        masker):
    """A new tool turn moves the window: one more result is masked, one the
    first request went out with whole, whose place that request's check
    proved (``checked_splice``): spliced there, with no check, as masking
    anew makes it."""
    masker.mask(body(conversation(turns=3)), CHAT)
    grown = body(conversation(turns=4))
    outcome, checks = checks_while(lambda: masker.mask(grown, CHAT))
    assert isinstance(outcome, Masked) and not outcome.reused
    assert checks == 0
    assert outcome.body == masked_anew(grown)


def test_a_result_whose_place_no_parse_proved_is_spliced_and_checked_when_first_masked(
        masker):
    """The first request had nothing to mask, so nothing checked it: the
    result the next one masks sits where only a search found it, and the
    masked body is checked."""
    assert not isinstance(masker.mask(body(conversation(turns=1)), CHAT), Masked)
    grown = body(conversation(turns=2))
    outcome, checks = checks_while(lambda: masker.mask(grown, CHAT))
    assert isinstance(outcome, Masked)
    assert checks == 1
    assert outcome.body == masked_anew(grown)


def test_a_request_whose_other_members_changed_is_masked_anew(masker):
    masker.mask(body(conversation(turns=3), temperature=0), CHAT)
    changed = body(conversation(turns=3) + ANSWER, temperature=1)
    outcome, checks = checks_while(lambda: masker.mask(changed, CHAT))
    assert checks == 1
    assert outcome.body == masked_anew(changed)


def test_a_request_whose_history_was_edited_is_masked_anew(masker):
    masker.mask(body(conversation(turns=3)), CHAT)
    messages = conversation(turns=3) + ANSWER
    messages[1] = user("Fix the other bug.")
    edited = body(messages)
    outcome, checks = checks_while(lambda: masker.mask(edited, CHAT))
    assert checks == 1
    assert outcome.body == masked_anew(edited)


def resumed_from_while(action):
    """What the index of the request was resumed from (None: made whole, or
    not made: a body that is not JSON)."""
    with mock.patch.object(tool_turns, "_resumed", wraps=tool_turns._resumed) as resumed:
        outcome = action()
    return outcome, resumed.call_args.args[0] if resumed.called else None


def test_a_request_grown_from_a_kept_one_is_indexed_from_its_index_without_a_document(masker):
    """The second request of a conversation has no document to be read
    from (none is kept before the third): it is parsed whole, but its index
    is resumed from the first's; a new tool turn moves the window, so the
    result is spliced and checked, and must be what masking anew gives."""
    first = conversation(turns=3)
    masker.mask(body(first), CHAT)
    grown = body(conversation(turns=4))
    outcome, resume = resumed_from_while(lambda: masker.mask(grown, CHAT))
    assert resume is not None and resume.items == len(first)
    assert isinstance(outcome, Masked)
    assert outcome.body == masked_anew(grown)


def test_the_results_a_request_shares_with_the_kept_one_are_not_judged_again(masker):
    """A result's judgement (kept and why, or its placeholder) is kept with
    the request: the next one judges only the results that left the window
    since, even with the judgements cache emptied."""
    masker.mask(body(conversation(turns=3)), CHAT)
    masker.mask(body(conversation(turns=4)), CHAT)
    masker.memory.judgements.clear()
    grown = body(conversation(turns=5))
    with mock.patch.object(planner, "judge", wraps=planner.judge) as judge:
        outcome = masker.mask(grown, CHAT)
    assert [call.args[0].call_id for call in judge.call_args_list] == ["call_3_0"]
    assert isinstance(outcome, Masked)
    assert outcome.body == masked_anew(grown)


def test_a_request_whose_history_was_edited_is_indexed_whole(masker):
    masker.mask(body(conversation(turns=3)), CHAT)
    messages = conversation(turns=4)
    messages[1] = user("Fix the other bug.")
    edited = body(messages)
    outcome, resume = resumed_from_while(lambda: masker.mask(edited, CHAT))
    assert resume is None
    assert isinstance(outcome, Masked)
    assert outcome.body == masked_anew(edited)


@pytest.mark.parametrize("between", [
    # The list closed, and the member written again: the parse keeps the
    # second list, which is not the previous request's items plus more.
    b'],"messages":[{"role":"user","content":"x"}',
    b',{"role":"user","content":"y"}],"messages":[{"role":"user","content":"x"}',
    # Not items: a value cut in two.
    b',{"role":"user","content":"y"',
])
def test_bytes_between_that_are_not_added_items_mean_the_body_is_masked_anew(between, masker):
    first = json.dumps({"messages": conversation(turns=3), "model": "m"}).encode()
    masker.mask(first, CHAT)
    end = first.rindex(b'], "model"')
    request = first[:end] + between + first[end:]
    outcome, resume = resumed_from_while(lambda: masker.mask(request, CHAT))
    # Its first items need not be the kept request's: indexed whole.
    assert resume is None
    assert_goes_out_as_read_exactly(request, outcome, POLICY)


# Where a list closes, proven by the read ------------------------------------


def test_a_marker_before_the_lists_own_bracket_proves_where_it_closes():
    request = b'{"messages": [1, [2]], "model": "m"}'
    document, proven = loads_marking_end(request, "messages", request.index(b'], "model"'))
    assert proven
    assert document == orjson.loads(request)


@pytest.mark.parametrize("request_body, bracket", [
    (b'{"messages": [1, [2]], "model": "m"}', 0),  # the bracket of a nested list
    (b'{"messages": [], "model": "m"}', 0),  # an empty list takes no marker
    (b'{"messages": [1], "messages": [2]}', 0),  # a list the parse does not keep
    (b'{"messages": [1], "other": [2]}', 1),  # another member's list
])
def test_a_marker_before_any_other_bracket_proves_nothing_and_the_document_is_the_bodys(
        request_body, bracket):
    at = [n for n, byte in enumerate(request_body) if byte == ord("]")][bracket]
    document, proven = loads_marking_end(request_body, "messages", at)
    assert not proven
    assert document == orjson.loads(request_body)


@pytest.mark.parametrize("write", [
    orjson.dumps,
    lambda d: json.dumps(d).encode(),
    lambda d: json.dumps(d, indent=2).encode(),
])
@pytest.mark.parametrize("layout", [
    {"model": "m", "messages": [1, [2]]},
    {"messages": [1, [2]], "model": "m", "stream": True},
    {"messages": [1, [2]], "tools": [{"name": "model", "enum": ["model"]}], "model": "m"},
])
def test_the_guess_of_where_the_list_closes_is_right_for_the_usual_layouts(write, layout):
    request = write(layout)
    quick = QuickBody.read(request, "messages")
    assert quick is not None
    end = quick.guess_list_end("messages")
    assert end is not None
    assert loads_marking_end(request, "messages", end)[1]


# What is kept --------------------------------------------------------------------


def kept(body_bytes: bytes, end: int, in_a_row: int = DOCUMENT_AFTER_REQUESTS) -> PreviousRequest:
    return PreviousRequest("chat", False, body_bytes, end, 1, b"[1]", (), in_a_row=in_a_row)


def test_a_kept_request_replaces_the_one_it_grew_from():
    store = PreviousRequests()
    first = kept(b'{"messages":[1]}', 14)
    store.keep(first)
    found = store.grown_from(b'{"messages":[1,2]}', "chat", False)
    assert found is not None and found.previous is first
    store.keep(kept(b'{"messages":[1,2]}', 16), replaces=first)
    grown = store.grown_from(b'{"messages":[1,2,3]}', "chat", False)
    assert grown is not None
    assert grown.previous.body == b'{"messages":[1,2]}'
    assert grown.added(b'{"messages":[1,2,3]}') == b",3"
    assert store.grown_from(b'{"messages":[1,9]}', "chat", False) is None
    store.clear()
    assert store.grown_from(b'{"messages":[1,2,3]}', "chat", False) is None


def long_list(name: str, items: int) -> bytes:
    """A body whose list closes past its first few hundred bytes."""
    return b'{"%s":[%s]}' % (name.encode(), b",".join([b'"' + b"x" * 40 + b'"'] * items))


def test_a_body_is_found_among_many_conversations_the_latest_it_grew_from_first():
    """Kept requests are looked for by their first bytes: a body finds the
    latest one it grew from, one of a list that closes early too, and none
    of another conversation."""
    store = PreviousRequests()
    short = kept(b'{"m":[]}', 6)  # its list closes at once
    store.keep(short)
    others = [long_list(f"c{n}", 10) for n in range(100)]
    for other in others:
        store.keep(kept(other, len(other) - 2))
    old, newer = long_list("m", 10), long_list("m", 11)
    store.keep(kept(old, len(old) - 2))
    store.keep(kept(newer, len(newer) - 2))
    grown = long_list("m", 12)
    found = store.grown_from(grown, "chat", False)
    assert found is not None and found.previous.body == newer
    store.keep(kept(b'{"m":[]}', 6))  # now the latest
    found = store.grown_from(grown, "chat", False)
    assert found is not None and found.previous.end == 6
    assert store.grown_from(long_list("q", 12), "chat", False) is None
    found = store.grown_from(others[7][:-2] + b',"y"]}', "chat", False)
    assert found is not None and found.previous.body == others[7]


def test_a_request_no_longer_kept_is_not_found_by_its_first_bytes():
    store = PreviousRequests(bytes_kept=2 * 1500)
    first, second = long_list("a", 10), long_list("b", 10)
    store.keep(kept(first, len(first) - 2))
    store.keep(kept(second, len(second) - 2))
    store.keep(kept(long_list("c", 10), len(first) - 2))
    assert store.grown_from(first[:-2] + b',"y"]}', "chat", False) is None
    assert store.grown_from(second[:-2] + b',"y"]}', "chat", False) is not None


def index_of(results: int, chars: int = 1) -> IndexedItems:
    found = [ToolResult((n,), f"c{n}", 0, "bash", "x" * chars, "x" * chars)
             for n in range(results)]
    return IndexedItems(ToolTurnIndex(results=found), {}, results, results * chars)


def kept_index(store: PreviousRequests, name: bytes) -> IndexedItems | None:
    found = store.grown_from(b'{"%s":[1,2]}' % name, "chat", False)
    assert found is not None
    return found.indexed


def test_an_index_comes_back_with_the_request_a_body_grew_from_within_its_bounds(monkeypatch):
    """The collector walks an index's named tuples for as long as they
    live: an index of too many results is not kept, and past the bound of
    all results the least recently used go first."""
    monkeypatch.setattr(previous_requests_module, "INDEX_RESULTS_PER_REQUEST", 5)
    monkeypatch.setattr(previous_requests_module, "INDEX_RESULTS_KEPT", 8)
    store = PreviousRequests()
    small, large = index_of(4), index_of(6)
    store.keep(kept(b'{"a":[1]}', 7), indexed=small)
    store.keep(kept(b'{"b":[1]}', 7), indexed=large)
    assert kept_index(store, b"a") is small
    assert kept_index(store, b"b") is None  # more results than a request may keep
    store.keep(kept(b'{"c":[1]}', 7), indexed=index_of(3))
    assert kept_index(store, b"c") is not None
    store.keep(kept(b'{"d":[1]}', 7), indexed=index_of(4))  # 4 + 3 + 4 > 8: "a" goes
    assert kept_index(store, b"a") is None
    assert kept_index(store, b"c") is not None and kept_index(store, b"d") is not None


def test_indexes_keep_no_more_than_their_bound_of_characters(monkeypatch):
    """An index holds its results' texts: their characters are bounded too."""
    monkeypatch.setattr(previous_requests_module, "INDEX_CHARS_KEPT", 100)
    store = PreviousRequests()
    store.keep(kept(b'{"a":[1]}', 7), indexed=index_of(2, chars=30))
    store.keep(kept(b'{"b":[1]}', 7), indexed=index_of(1, chars=101))  # alone over
    store.keep(kept(b'{"c":[1]}', 7), indexed=index_of(1, chars=30))
    assert kept_index(store, b"b") is None
    assert kept_index(store, b"a") is not None and kept_index(store, b"c") is not None
    store.keep(kept(b'{"d":[1]}', 7), indexed=index_of(1, chars=30))  # 60 + 30 + 30 > 100
    assert kept_index(store, b"a") is None
    assert kept_index(store, b"c") is not None and kept_index(store, b"d") is not None


def test_a_marker_where_there_is_no_bracket_proves_nothing():
    request = b'{"messages": [1], "model": "m"}'
    assert loads_marking_end(request, "messages", 3) == (orjson.loads(request), False)


def test_the_least_recently_kept_conversations_go_when_their_bytes_run_out():
    store = PreviousRequests(bytes_kept=2500)
    first = b'{"a":[1]}' + b" " * 10
    second = b'{"b":[1]}' + b" " * 10
    store.keep(kept(first, 7))
    store.keep(kept(second, 7))
    store.keep(kept(b'{"c":[1]}', 7))
    assert store.grown_from(first, "chat", False) is None
    assert store.grown_from(second, "chat", False) is not None


def test_bytes_inserted_into_a_list_where_the_guess_went_wrong_are_not_taken_for_items(masker):
    """A member after the list holds ``], "model"`` (a list, then the next
    member's name): the guess of where the list closes lands in it, the
    check of the masked body disproves it, and a body that inserts an
    element into that other list is not taken for one that adds items."""
    first = json.dumps({"messages": conversation(turns=3), "model": "m",
                        "tools": [{"enum": [1], "model": 2}]}).encode()
    assert isinstance(masker.mask(first, CHAT), Masked)
    wrong = first.rindex(b'], "model"')
    request = first[:wrong] + b", 2" + first[wrong:]
    original, reuses = rewrite.reuse_of, []

    def recorded(*args, **kwargs):
        reuses.append(found := original(*args, **kwargs))
        return found

    with mock.patch.object(rewrite, "reuse_of", recorded):
        outcome = masker.mask(request, CHAT)
    assert all(found is None for found in reuses)  # not grown from the first
    assert outcome.body == masked_anew(request)


# The documents kept with the requests ------------------------------------------


def test_a_kept_document_comes_back_with_the_request_a_body_grew_from():
    store = PreviousRequests()
    document = {"messages": [1]}
    store.keep(kept(b'{"messages":[1]}', 14), document=document)
    grown = store.grown_from(b'{"messages":[1,2]}', "chat", False)
    assert grown is not None and grown.document is document


def test_a_document_goes_with_its_request():
    """Replaced by the request that grew from it, or pushed out: a later
    body must never be read from the document of a request not kept."""
    store = PreviousRequests(bytes_kept=2200)
    first = kept(b'{"messages":[1]}', 14)
    store.keep(first, document={"messages": [1]})
    store.keep(kept(b'{"messages":[1,2]}', 16), replaces=first)
    grown = store.grown_from(b'{"messages":[1,2,3]}', "chat", False)
    assert grown is not None and grown.document is None
    other = kept(b'{"other":[1]}', 11)
    store.keep(other, document={"other": [1]})
    store.keep(kept(b'{"a":[1]}', 7))
    store.keep(kept(b'{"b":[1]}', 7))  # the bytes run out: ``other`` goes first
    assert store.grown_from(b'{"other":[1,2]}', "chat", False) is None
    assert store._documents == {} and store._document_bytes == 0


def found_document(store: PreviousRequests, name: bytes, pad: bool = True) -> object:
    grown = store.grown_from(b'{"%s":[1,2]}' % name + b" " * (90 if pad else 0), "chat", False)
    assert grown is not None  # the request is kept either way
    return grown.document


def test_when_documents_run_out_of_bytes_a_new_one_takes_the_place_of_one_gone_idle():
    """The documents of agents still at work stay; a newcomer's is kept
    once one of them has not been used for a while (its agent is done)."""
    now = [0.0]
    # Room for one document of a 99-byte body (168 bytes), not two.
    store = PreviousRequests(document_bytes_kept=200, clock=lambda: now[0])
    store.keep(kept(b'{"a":[1]}' + b" " * 90, 7), document={"a": [1]})
    now[0] += DOCUMENT_IDLE_SECONDS / 2
    store.keep(kept(b'{"b":[1]}' + b" " * 90, 7), document={"b": [1]})
    assert found_document(store, b"a") == {"a": [1]}
    assert found_document(store, b"b") is None
    now[0] += DOCUMENT_IDLE_SECONDS + 1
    store.keep(kept(b'{"c":[1]}' + b" " * 90, 7), document={"c": [1]})
    assert found_document(store, b"a") is None
    assert found_document(store, b"c") == {"c": [1]}


def test_with_many_conversations_going_on_no_document_is_kept():
    """Past a few agents at work, the collector's walks over documents
    cost more than reading bodies whole."""
    store = PreviousRequests()
    for n in range(DOCUMENT_CONVERSATIONS):
        store.keep(kept(b'{"m%d":[1]}' % n, 7 + len(str(n))), document={"m": [n]})
    store.keep(kept(b'{"late":[1]}', 10), document={"late": [1]})
    assert found_document(store, b"late", pad=False) is None
    assert found_document(store, b"m0", pad=False) is None


def test_no_document_is_kept_for_a_request_not_kept():
    store = PreviousRequests(requests_kept=0)
    store.keep(kept(b'{"a":[1]}', 7), document={"a": [1]})
    assert store._documents == {} and store._document_bytes == 0


def test_once_many_conversations_go_on_the_documents_kept_go_too():
    store = PreviousRequests()
    store.keep(kept(b'{"m0":[1]}', 8), document={"m": [0]})
    for n in range(1, DOCUMENT_CONVERSATIONS + 1):
        store.keep(kept(b'{"m%d":[1]}' % n, 7 + len(str(n))))
    assert found_document(store, b"m0", pad=False) == {"m": [0]}
    store.keep(kept(b'{"late":[1]}', 10), document={"late": [1]})
    assert found_document(store, b"m0", pad=False) is None


def test_a_conversation_keeps_a_document_from_its_third_request_in_a_row_on():
    """One that stops after a request or two leaves nothing for the
    collector to walk."""
    store = PreviousRequests()
    for in_a_row in range(1, DOCUMENT_AFTER_REQUESTS + 1):
        store.keep(kept(b'{"a":[1]}', 7, in_a_row), document={"a": [in_a_row]})
        expected = {"a": [in_a_row]} if in_a_row >= DOCUMENT_AFTER_REQUESTS else None
        assert found_document(store, b"a", pad=False) == expected
        store.clear()


def test_requests_in_a_row_are_counted_from_the_conversations_first(masker):
    """Masked anew or reused, each request of a conversation counts one
    more than the one it grew from."""
    answers = [{"role": "assistant", "content": "It is fixed."}, user("Thanks.")]
    store = masker.previous
    assert store is not None
    for n in range(4):
        masker.mask(body(conversation(turns=3) + answers * n), CHAT)
        grown = store.grown_from(body(conversation(turns=3) + answers * (n + 1)), "chat", False)
        assert grown is not None and grown.previous.in_a_row == n + 1
