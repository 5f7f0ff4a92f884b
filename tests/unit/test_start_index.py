"""A body is compared only with the kept requests it may have grown from
(``conversation/reuse/start_index.py``): within the kept requests that share
its first bytes, those holding its own bytes where their conversations were
found to differ, and those whose list closes before that. Never one it grew
from left out: every kept request whose bytes up to where its list closes
begin the body (a retry's whole body included) is among the candidates."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.reuse import previous_requests
from obsmask_core.conversation.reuse.records import PreviousRequest
from obsmask_core.conversation.reuse.start_index import StartIndex, common_prefix
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from support.formats import Call, Result, Say, Turn, claude_code_body, convert

SHARED = b'{"tools":[' + b'"t",' * 200 + b'"t"],"messages":['


def kept(body: bytes) -> PreviousRequest:
    end = body.rindex(b"]")
    return PreviousRequest(fmt="chat", recall=False, body=body, end=end, items=1,
                           written=b"", signature=())


# Conversations: the shared start, then a first message of a few letters,
# then more items, each request the one before with items added.
# Long enough (a few letters, many times) to be filed under their own bytes,
# or not quite.
conversation_texts = st.lists(
    st.tuples(st.text("abc", min_size=1, max_size=3), st.integers(1, 40)).map(
        lambda text_times: text_times[0] * text_times[1]),
    min_size=1, max_size=4)


def requests_of(texts: list[str]) -> list[bytes]:
    return [SHARED + b",".join(f'"{text}"'.encode() for text in texts[:count]) + b"]}"
            for count in range(1, len(texts) + 1)]


@settings(max_examples=300)
@given(st.lists(conversation_texts, min_size=1, max_size=6), st.data())
def test_every_kept_request_a_body_begins_with_is_a_candidate(conversations, data):
    index = StartIndex()
    kept_requests: dict[int, PreviousRequest] = {}
    for texts in conversations:
        steps = requests_of(texts)
        upto = data.draw(st.integers(1, len(steps)))
        previous_key = None
        for step in steps[:upto]:
            request = kept(step)
            key = len(kept_requests)
            if previous_key is not None and data.draw(st.booleans()):
                index.discard(previous_key, kept_requests.pop(previous_key))
                index.add(key, request, grown=True)
            else:
                index.add(key, request, grown=False)
            kept_requests[key] = request
            previous_key = key
    for texts in conversations:
        for body in requests_of(texts):
            found = set(index.candidates(body, "chat", False))
            for key, request in kept_requests.items():
                if body.startswith(request.body[:request.end]):
                    assert key in found


@given(st.binary(max_size=40), st.binary(max_size=40), st.integers(1, 50))
def test_the_common_prefix_is_the_longest_both_begin_with(first, second, chunk):
    """Whatever the chunk it compares at a time (and the bodies are often
    one's prefix the other, or differ late)."""
    if first and second and first[0] % 2:
        second = first + second  # a long shared start
    shared = common_prefix(first, second, chunk)
    assert first[:shared] == second[:shared]
    assert shared == min(len(first), len(second)) or first[shared] != second[shared]


def test_a_claude_code_request_is_compared_with_its_own_conversations_kept_request_alone(
        monkeypatch):
    """Twenty Claude Code conversations share their tools and system: each
    request is compared with its own conversation's kept request, not with
    the twenty (every one of which the body was compared with before)."""
    compared: list[int] = []
    original = previous_requests._grown

    def spy(body, candidates, same_to=0):
        compared.append(len(candidates))
        return original(body, candidates, same_to)

    monkeypatch.setattr(previous_requests, "_grown", spy)
    policy = MaskPolicy(window_turns=1, price_model="auto", frontier_breakpoint=True)
    masker = Masker(policy)
    letters = "abcdefghijklmnopqrst"
    for turn in range(1, 5):
        for letter in letters:
            events = [Say("user", letter * 3000)]
            for at in range(turn):
                events += [Turn([Call(f"c{at}", "Bash")], text="t" * 200),
                           Result(f"c{at}", f"{at} " + "o" * 2500)]
            body = json.dumps(claude_code_body(convert(ANTHROPIC, events),
                                               model="claude-opus-5-5")).encode()
            before = len(compared)
            masker.mask(body, ANTHROPIC)
            if turn > 1:
                assert compared[before:] and max(compared[before:]) == 1, (turn, letter)
