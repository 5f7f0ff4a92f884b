"""The three request formats (``conversation/turns/wire_formats.py``): where each
keeps its conversation and a result's value, what a masked value becomes
(a string: the placeholder; a list of blocks: its non-text blocks where they
were, its text blocks one text block at the first one's place, with that
block's other fields), and ``set_at``, which writes a value without changing
the objects the caller still holds."""

from __future__ import annotations

import copy

import pytest

from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, FORMATS, RESPONSES, set_at

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
DOCUMENT = {"type": "document", "source": {"type": "text", "data": "kept"}}


def test_each_format_names_its_list_and_the_path_to_a_result_value():
    assert {name: fmt.list_member for name, fmt in FORMATS.items()} == {
        "chat": "messages", "anthropic": "messages", "responses": "input"}
    assert CHAT.value_path((4,)) == ("content",)
    assert ANTHROPIC.value_path((4, 2)) == ("content", 2, "content")
    assert RESPONSES.value_path((4,)) == ("output",)


@pytest.mark.parametrize("fmt", [CHAT, ANTHROPIC, RESPONSES], ids=lambda fmt: fmt.name)
def test_a_string_becomes_the_placeholder(fmt):
    assert fmt.replacement("a long tool output", "[masked]") == "[masked]"


def test_a_list_of_blocks_keeps_its_other_blocks_and_one_text_block_in_place():
    original = [IMAGE, {"type": "text", "text": "one"}, DOCUMENT,
                {"type": "text", "text": "two"}, IMAGE]
    assert ANTHROPIC.replacement(original, "[masked]") == [
        IMAGE, {"type": "text", "text": "[masked]"}, DOCUMENT, IMAGE]


def test_the_text_block_keeps_the_first_text_blocks_other_fields():
    first = {"type": "text", "text": "one", "cache_control": {"type": "ephemeral"},
             "citations": None}
    original = [first, {"type": "text", "text": "two", "extra": 1}]
    assert ANTHROPIC.replacement(original, "[masked]") == [
        {"type": "text", "text": "[masked]", "cache_control": {"type": "ephemeral"},
         "citations": None}]
    assert first["text"] == "one"  # the original block is not changed


def test_each_format_has_its_own_text_block_types():
    responses = [{"type": "input_text", "text": "in"}, {"type": "text", "text": "stays"},
                 {"type": "output_text", "text": "out"}]
    assert RESPONSES.replacement(responses, "[m]") == [
        {"type": "input_text", "text": "[m]"}, {"type": "text", "text": "stays"}]
    anthropic = [{"type": "input_text", "text": "stays"}, {"type": "text", "text": "goes"}]
    assert ANTHROPIC.replacement(anthropic, "[m]") == [
        {"type": "input_text", "text": "stays"}, {"type": "text", "text": "[m]"}]


def test_a_block_whose_text_is_not_a_string_is_not_a_text_block():
    original = [{"type": "text", "text": None}, {"type": "text", "text": "real"}]
    assert ANTHROPIC.replacement(original, "[m]") == [
        {"type": "text", "text": None}, {"type": "text", "text": "[m]"}]


def test_a_value_without_text_blocks_becomes_the_placeholder():
    """Chat has no text blocks: any list is replaced whole (the planner never
    masks one, having found no text in it)."""
    assert ANTHROPIC.replacement([IMAGE], "[m]") == "[m]"
    assert CHAT.replacement([{"type": "text", "text": "x"}], "[m]") == "[m]"
    assert RESPONSES.replacement(None, "[m]") == "[m]"


def test_set_at_writes_the_value_through_copies():
    """Every container on the path is copied: the caller's objects (the
    original request) stay as they were, and the other items are the same
    objects as before."""
    items = [
        {"role": "user", "content": "go"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a",
                                      "content": "old"}]},
    ]
    snapshot = copy.deepcopy(items)
    first, second = items
    out = list(items)
    set_at(out, 1, ("content", 0, "content"), "new")
    assert items == snapshot and items[1] is second
    assert out[0] is first
    assert out[1] is not second and out[1]["content"] is not second["content"]
    assert out[1]["content"][0] == {"type": "tool_result", "tool_use_id": "a", "content": "new"}


def test_set_at_with_an_empty_path_replaces_the_item():
    items: list[object] = ["a", "b"]
    set_at(items, 1, (), "c")
    assert items == ["a", "c"]


@pytest.mark.parametrize(
    ("path", "message"),
    [(("content", "key", "text"), "cannot follow 'key' into a list"),
     (("content", "key"), "cannot set 'key' in a list"),
     (("content", 0, 0), "cannot set 0 in a dict"),
     ((0,), "cannot set 0 in a dict")],
)
def test_set_at_refuses_a_path_that_does_not_fit(path, message):
    items: list[object] = [{"content": [{"text": "x"}]}]
    with pytest.raises(TypeError, match=message):
        set_at(items, 0, path, "new")
