"""A client's cache breakpoints (``conversation/billing/unmarked.py``,
``conversation/body/closing_mark.py``): what compares histories across
requests leaves ``cache_control`` out, and the breakpoint a client moves
on (the last member of the last block of its latest message) is found in
the bytes and in the parsed value alike, so the request as the client
sends it next can be recognised."""

from __future__ import annotations

import json

import orjson
from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.conversation.billing.unmarked import unmarked
from obsmask_core.conversation.body.closing_mark import closing_mark, without_closing_mark

MARK = {"type": "ephemeral"}


def test_unmarked_leaves_out_every_cache_control_member_and_nothing_else():
    marked = [{"cache_control": MARK, "type": "text", "text": "a"},
              {"type": "text", "text": '"cache_control":{"type":"ephemeral"}',
               "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    plain = [{"type": "text", "text": "a"},
             {"type": "text", "text": '"cache_control":{"type":"ephemeral"}'}]
    assert unmarked(orjson.dumps(marked)) == orjson.dumps(plain)


def test_claude_codes_moving_breakpoint_is_found_in_the_bytes_of_its_last_message():
    message = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "out"},
        {"type": "text", "text": "go on", "cache_control": MARK}]}
    for written in (orjson.dumps([message]), json.dumps([message]).encode()):
        end = len(written) - 1  # the list's closing bracket
        span = closing_mark(written, end)
        assert span is not None
        without = written[:span[0]] + written[span[1]:]
        assert json.loads(without) == [without_closing_mark(message)]
        assert without_closing_mark(message) == {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "out"},
            {"type": "text", "text": "go on"}]}


def test_a_breakpoint_that_does_not_end_the_last_message_is_not_a_closing_mark():
    early = [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": MARK},
                                          {"type": "text", "text": "b"}]}]
    first_member = [{"role": "user", "content": [{"cache_control": MARK, "type": "text"}]}]
    in_text = [{"role": "user", "content": 'x","cache_control":{"type":"ephemeral"}}'}]
    # A member of the message itself: no block the API counts a breakpoint on.
    of_the_item = [{"role": "user", "content": [{"type": "text", "text": "a"}],
                    "cache_control": MARK}]
    for value in (early, first_member, in_text, of_the_item):
        written = orjson.dumps(value)
        assert closing_mark(written, len(written) - 1) is None
    assert without_closing_mark(early) is None and without_closing_mark(in_text) is None


_leaves = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=8))
_json = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.text(max_size=5).filter(lambda k: k != "cache_control"), inner,
                    max_size=3)), max_leaves=12)


@st.composite
def closed_by_a_mark(draw: st.DrawFn) -> list[object]:
    """A list whose last item ends with a cache_control member, at a depth,
    inside a list (a block's, in a content list)."""
    block = draw(st.dictionaries(st.text(max_size=5).filter(lambda k: k != "cache_control"),
                                 _json, min_size=1, max_size=3))
    value: object = {**block, "cache_control": MARK}
    for depth in range(draw(st.integers(1, 4))):
        if depth == 0 or draw(st.booleans()):
            value = [*draw(st.lists(_json, max_size=2)), value]
        else:
            name = draw(st.text(max_size=4).filter(lambda k: k != "cache_control"))
            others = draw(st.dictionaries(
                st.text(max_size=4).filter(lambda k: k != "cache_control"), _json, max_size=2))
            others.pop(name, None)  # the marked value's member comes last
            value = {**others, name: value}
    return [*draw(st.lists(_json, max_size=2)), value]


@given(closed_by_a_mark(), st.booleans())
def test_the_bytes_and_the_value_without_the_closing_mark_agree(items, spaced):
    written = json.dumps(items).encode() if spaced else orjson.dumps(items)
    span = closing_mark(written, len(written) - 1)
    assert span is not None
    assert json.loads(written[:span[0]] + written[span[1]:]) == without_closing_mark(items)
