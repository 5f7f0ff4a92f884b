"""A body that only adds items to a kept request whose list's end was
proven is read from that request's document and the added bytes alone:
the result must be what reading the whole body gives, and anything that is
not ``,`` and whole items is left to the whole read."""

from __future__ import annotations

import itertools
import json
from unittest import mock

import orjson
import pytest

from obsmask_core.conversation.body import quick_body
from obsmask_core.conversation.body.quick_body import QuickBody
from obsmask_core.conversation.body.request_body import ExactBody
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_read_body
from obsmask_core.conversation.reuse import previous_requests
from obsmask_core.conversation.turns import tool_turns
from obsmask_core.conversation.turns.wire_formats import CHAT
from support.chat import body, conversation, user
from support.chat_masking import ANSWER_AND_REPLY as ANSWER
from support.chat_masking import LAST_TURN_POLICY as POLICY
from support.chat_masking import assert_goes_out_as_read_exactly

OLD = b'{"messages": [{"role": "user", "content": "hi"}, [2]], "model": "m"}'
END = OLD.index(b'], "model"')


@pytest.fixture
def masker() -> Masker:
    """What masking keeps between requests: new for each test, so what one
    test kept cannot decide another's."""
    return Masker(POLICY)


def grown_read(added: bytes) -> tuple[bytes, QuickBody | None]:
    new = OLD[:END] + added + OLD[END:]
    return new, QuickBody.grown(new, "messages", orjson.loads(OLD), END, END + len(added))


@pytest.mark.parametrize("added", [
    b', 3',
    b' ,{"role": "tool", "content": "a ] b", "tool_call_id": "c"} , [4, {"x": []}] ',
    b',"caf\\u00e9 \\ud83d\\ude00"',
    b"",
    b"  \n ",
])
def test_added_items_read_alone_give_the_document_the_whole_body_gives(added):
    new, read = grown_read(added)
    assert read is not None
    assert read.members == orjson.loads(new)
    assert read.items is read.members["messages"]
    assert read.list_end == END + len(added)


@pytest.mark.parametrize("added", [
    # The list closed, another member opened: not items of the list.
    b', 3], "other": [4',
    b', 3], "messages": [4',
    # No comma first, half a value, two values run together, not JSON.
    b' 3',
    b', {"a": 1',
    b', 3 4',
    b', NaN',
    b',',
])
def test_bytes_that_are_not_a_comma_and_whole_items_are_left_to_the_whole_read(added):
    assert grown_read(added)[1] is None


def test_items_nested_deeper_than_orjson_reads_in_a_body_are_left_to_the_whole_read():
    """orjson reads 1024 levels: read alone, in a list of their own, items
    may nest a level deeper than they could in the body's list."""
    deep = b"[" * 1023 + b"]" * 1023
    assert orjson.loads(b"[" + deep + b"]")  # read alone: fine
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(OLD[:END] + b"," + deep + OLD[END:])
    assert grown_read(b"," + deep)[1] is None


def test_the_kept_document_is_not_changed_by_a_body_grown_from_it():
    document = orjson.loads(OLD)
    before = json.dumps(document)
    new = OLD[:END] + b", 3" + OLD[END:]
    read = QuickBody.grown(new, "messages", document, END, END + 3)
    assert read is not None and read.items[-1] == 3
    assert json.dumps(document) == before


def bytes_parsed_while(action):
    with mock.patch.object(quick_body.orjson, "loads", wraps=orjson.loads) as loads:
        outcome = action()
    return outcome, [len(call.args[0]) for call in loads.call_args_list]


def test_from_its_second_request_on_a_conversation_is_masked_without_parsing_a_whole_body(
        masker, monkeypatch):
    """Each request adds a tool turn and masks one result more, so none goes
    out as its predecessor's masked body again. The first is read whole,
    spliced and checked, and its check proves where each of its results
    sits (``checked_splice``); each later one is read from its added bytes
    alone, its index resumed, and where its added results sit is proven on
    the way (``proven_spans``): the result it masks sits where a parse
    proved, so its masked body is a splice that needs no check. Only the
    added bytes are parsed (read, then the proof of their results'
    places), never a whole body, and what goes out is what the exact
    reader makes of the body alone."""
    # Many conversations going on: no document kept (see the test below).
    monkeypatch.setattr(previous_requests, "DOCUMENT_CONVERSATIONS", 0)
    requests = [body(conversation(turns=3 + n)) for n in range(5)]
    assert isinstance(masker.mask(requests[0], CHAT), Masked)
    for previous, request in itertools.pairwise(requests):
        with mock.patch.object(tool_turns, "_resumed", wraps=tool_turns._resumed) as resumed:
            outcome, parsed = bytes_parsed_while(lambda r=request: masker.mask(r, CHAT))
        assert isinstance(outcome, Masked) and not outcome.reused
        [(resume,), _] = resumed.call_args
        assert resume is not None and resume.items == len(json.loads(previous)["messages"])
        assert parsed and max(parsed) < len(request) - len(previous) + 8
        exact = mask_read_body(ExactBody.read(request, "messages"), POLICY, CHAT)
        assert isinstance(exact, Masked)
        assert outcome.body == exact.body


@pytest.mark.parametrize("between", [
    b'],"messages":[{"role":"user","content":"x"}',
    b',{"role":"user","content":"y"}],"other":[{"role":"user","content":"x"}',
    b',{"role":"user","content":"y"',
])
def test_bytes_after_a_proven_list_that_are_not_added_items_mean_the_body_is_read_whole(
        between, masker):
    messages = conversation(turns=3)
    requests = [json.dumps({"messages": messages + [user("go on")] * n, "model": "m"}).encode()
                for n in range(3)]
    for request in requests:  # the third's document is kept
        masker.mask(request, CHAT)
    end = requests[2].rindex(b'], "model"')
    request = requests[2][:end] + between + requests[2][end:]
    assert_goes_out_as_read_exactly(request, masker.mask(request, CHAT), POLICY)


@pytest.mark.parametrize("depth", [300, 990, 995])
def test_a_request_adding_deeply_nested_items_comes_out_as_masking_it_anew(depth, masker):
    """Deep enough, Python's recursion refuses to compare items and the body
    passes through when masked anew: read from the kept document it must
    not come out otherwise."""
    requests = [body(conversation(turns=3) + ANSWER * n) for n in range(3)]
    # Written by hand: json's writer itself stops short of such depths.
    end = requests[2].rindex(b"]")
    requests.append(requests[2][:end] + b', {"role": "user", "content": '
                    + b"[" * depth + b"]" * depth + b"}" + requests[2][end:])
    for request in requests[:3]:
        masker.mask(request, CHAT)
    in_order = masker.mask(requests[3], CHAT)
    masker.previous.clear()
    anew = masker.mask(requests[3], CHAT)
    assert type(in_order) is type(anew)
    assert in_order.body == anew.body


def test_with_few_conversations_going_on_a_grown_body_is_read_whole_once_then_from_its_document(
        masker):
    """With few conversations going on, a conversation's third request in a
    row has its document kept: read from its added bytes alone, it is read
    whole once more for that (the first is read whole, the second from its
    added bytes), and every later request is read from the
    kept document and its added bytes (``QuickBody.grown``): no body is
    parsed whole again, and what goes out is what the exact reader makes
    of the body alone."""
    requests = [body(conversation(turns=3 + n)) for n in range(7)]
    assert whole_reads_of(requests, masker) == [0, 1] + [0] * (len(requests) - 3)


def whole_reads_of(requests: list[bytes], masker: Masker) -> list[int]:
    """How many times each request after the first was parsed whole
    (orjson's loads, wherever it is called from: grown_body's too), each
    checked to go out as the exact reader makes of it alone."""
    assert isinstance(masker.mask(requests[0], CHAT), Masked)
    whole_reads = []
    for request in requests[1:]:
        outcome, parsed = bytes_parsed_while(lambda r=request: masker.mask(r, CHAT))
        whole_reads.append(sum(size >= len(request) for size in parsed))
        assert_goes_out_as_read_exactly(request, outcome, POLICY)
    return whole_reads


@pytest.mark.parametrize("room", [0, 1.0, 3.0])
def test_a_body_is_read_whole_for_its_document_only_when_that_document_would_be_kept(room):
    """The whole read a conversation's third request gets is for keeping its
    document. One that would not fit the documents' budget (here none, or
    room for its predecessor's document only: each request is longer than
    the one before) would be read and thrown away, and so would every later
    request's: none is read whole. With room for it, it is read once, and
    the later ones are read from the kept document and their added bytes."""
    requests = [body(conversation(turns=3 + n)) for n in range(7)]
    room_bytes = int(len(requests[1]) * previous_requests.DOCUMENT_WEIGHT_PERCENT // 100 * room)
    masker = Masker(POLICY, previous=previous_requests.PreviousRequests(
        document_bytes_kept=room_bytes))
    reads_for_the_document = [0, 1] if room > 1 else [0, 0]
    assert whole_reads_of(requests, masker) == reads_for_the_document + [0] * (len(requests) - 3)
