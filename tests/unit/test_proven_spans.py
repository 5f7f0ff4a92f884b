"""Where a value sits in the body, proven by a parse, so that masking it
later is a splice: a span is proven only where a second read showed the
value there and nowhere else, a splice at proven spans is the body the
search and the check would give, and an edit whose span is not proven is
left to them."""

from __future__ import annotations

import json

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.body.quick_body import QuickBody
from obsmask_core.conversation.body.request_body import MemberAdded, Replacement
from obsmask_core.conversation.reuse.proven_spans import (
    candidates,
    constructed,
    prove_added,
    proven_by_check,
    shifted,
)
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from support.grown_bodies import KEPT, chat_turn, grown, proven_chat


def test_each_added_result_is_proven_where_its_text_is():
    added = [*chat_turn("call_1", "a, \"b\" ]"), *chat_turn("call_2", "a, \"b\" ]")]
    body, proven = proven_chat(added)
    assert set(proven) == {(2, ("content",)), (4, ("content",))}
    first, second = proven[(2, ("content",))], proven[(4, ("content",))]
    assert first[1] <= second[0]
    for start, end in (first, second):
        assert orjson.loads(body[start:end]) == 'a, "b" ]'


def test_a_value_found_in_the_wrong_place_is_not_proven():
    """The last member of the block that closes a turn's calls has no call id
    to search after: an equal input earlier in the item is found first, the
    sentinel reads in the wrong block, and nothing of those bytes is
    proven."""
    item = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "bash", "input": {"c": 1}},
        {"type": "tool_use", "id": "t2", "name": "bash", "input": {"c": 1}}]}
    body, start, end = grown([item])
    wanted = candidates([item], 1, ANTHROPIC.index([*KEPT, item]), ANTHROPIC)
    assert [place for place, _, _ in wanted] == [(1, ("content", 1, "input"))]
    assert prove_added(body, start, end, [item], 1, wanted) == {}


def test_a_splice_at_proven_spans_is_the_body_the_search_gives_and_reads_as_planned():
    added = [*chat_turn("call_1", "x" * 50), *chat_turn("call_2", "y" * 50)]
    body, proven = proven_chat(added, lambda v: json.dumps(v).encode())
    edits = [Replacement(2, ("content",), "x" * 50, "[masked 1]", anchor="call_1"),
             Replacement(4, ("content",), "y" * 50, "[masked 2]", anchor="call_2")]
    end = body.rindex(b"]")
    made = constructed(body, edits, proven, end)
    assert made is not None
    assert made[0] == QuickBody.replace_in(body, edits)
    assert made[1] == len(made[0]) - len(body)
    messages = orjson.loads(made[0])["messages"]
    assert [m["content"] for m in messages[2::2]] == ["[masked 1]", "[masked 2]"]


def test_an_edit_whose_span_is_not_proven_is_left_to_the_search_and_the_check():
    added = chat_turn("call_1", "x" * 50)
    body, proven = proven_chat(added)
    edits = [Replacement(0, ("content",), "go", "[masked]")]
    assert constructed(body, edits, proven, body.rindex(b"]")) is None


def test_a_member_is_added_before_the_brace_after_the_blocks_proven_last_member():
    """Where the frontier breakpoint goes: the block that closes a turn's
    calls, after its last member (its input), proven when it came."""
    item = {"role": "assistant", "content": [
        {"type": "text", "text": "Running it."},
        {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}]}
    body, start, end = grown([item])
    wanted = candidates([item], 1, ANTHROPIC.index([*KEPT, item]), ANTHROPIC)
    proven = prove_added(body, start, end, [item], 1, wanted)
    assert set(proven) == {(1, ("content", 1, "input"))}
    edit = MemberAdded(1, ("content", 1), item["content"][1], "cache_control",
                       {"type": "ephemeral"})
    made = constructed(body, [edit], proven, end)
    assert made is not None and made[0] == QuickBody.replace_in(body, [edit])
    block = orjson.loads(made[0])["messages"][1]["content"][1]
    assert block == {**item["content"][1], "cache_control": {"type": "ephemeral"}}


def test_taking_bytes_out_moves_the_spans_after_them_and_unproves_the_ones_holding_them():
    proven = {(1, ("a",)): (0, 10), (2, ("a",)): (10, 30), (3, ("a",)): (40, 50)}
    assert shifted(proven, (20, 25)) == {(1, ("a",)): (0, 10), (3, ("a",)): (35, 45)}


def test_two_edits_of_one_value_with_one_text_prove_nothing_after_the_check():
    """Swapped, they read back alike: the check cannot tell which is where."""
    twins = [(Replacement(1, ("content",), "v", "[m]"), (5, 8)),
             (Replacement(3, ("content",), "v", "[m]"), (20, 23)),
             (Replacement(5, ("content",), "w", "[m]"), (30, 33))]
    assert proven_by_check(twins) == {(5, ("content",)): (30, 33)}


tricky_text = st.text(alphabet=st.sampled_from(list('ab ,:[]{}"\\\n\u00e9\U0001f600')),
                      max_size=12)


@settings(max_examples=300, deadline=None)
@given(outputs=st.lists(tricky_text, min_size=1, max_size=4),
       ascii_escapes=st.booleans(), spaced=st.booleans())
def test_every_proven_span_holds_exactly_its_value_whatever_the_text_and_the_encoder(
        outputs, ascii_escapes, spaced):
    """Outputs full of commas, brackets, quotes and escapes, repeated, in
    either encoder: a span, once proven, is exactly the text of the value
    at its place (what the splice relies on)."""
    def write(value):
        return json.dumps(value, ensure_ascii=ascii_escapes,
                          separators=(", ", ": ") if spaced else (",", ":")).encode()
    added = [item for number, output in enumerate(outputs)
             for item in chat_turn(f"call_{number % 2}", output)]
    body, proven = proven_chat(added, write)
    items = [*KEPT, *added]
    for (index, path), (start, end) in proven.items():
        assert orjson.loads(body[start:end]) == items[index][path[0]]
        edits = [Replacement(index, path, items[index][path[0]], "[masked]")]
        made = constructed(body, edits, proven, body.rindex(b"]"))
        assert made is not None
        expected = [dict(item) for item in items]
        expected[index]["content"] = "[masked]"
        assert orjson.loads(made[0])["messages"] == expected
