"""The tool-turn model of each wire format (``conversation/turns/tool_turns.py``):
where a turn begins and ends, which turn each result belongs to (the latest
earlier one that declared its id), which results are orphans, and where the
model's answers begin (a request of the conversation ends just before one)."""

from __future__ import annotations

import pytest

from obsmask_core.conversation.turns.tool_turns import (
    index_anthropic_tool_turns,
    index_chat_tool_turns,
    index_responses_tool_turns,
)
from support.formats import FORMAT_IDS, FORMATS, Call, Event, Result, Say, Turn, convert

all_formats = pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)


def links(fmt, events: list[Event]) -> list[tuple[str, int, str | None]]:
    """(call id, turn number, tool name) of every linked result, in order."""
    index = fmt.index(convert(fmt, events))
    return [(result.call_id, result.turn, result.tool_name) for result in index.results]


# In every format ----------------------------------------------------------------------


@all_formats
def test_each_model_turn_with_calls_is_one_turn_holding_its_ids(fmt):
    events = [Say("user", "go"), Turn([Call("a"), Call("b", "grep")], text="first"),
              Result("a", "1"), Result("b", "2"), Turn([Call("c", "read")], text="second"),
              Result("c", "3")]
    index = fmt.index(convert(fmt, events))
    assert [turn.call_ids for turn in index.turns] == [("a", "b"), ("c",)]
    assert links(fmt, events) == [("a", 0, "bash"), ("b", 0, "grep"), ("c", 1, "read")]
    assert index.orphans == []


@all_formats
def test_a_result_belongs_to_the_latest_earlier_turn_that_declared_its_id(fmt):
    """Clients that reuse ids (``call_0`` in every turn): each result goes
    with the turn just before it, not with the first or the last turn."""
    events: list[Event] = [Say("user", "go")]
    for name in ("bash", "grep", "read"):
        events += [Turn([Call("call_0", name)], text=name), Result("call_0", name)]
    assert links(fmt, events) == [("call_0", 0, "bash"), ("call_0", 1, "grep"),
                                  ("call_0", 2, "read")]


@all_formats
def test_a_result_after_a_turn_that_does_not_declare_its_id_keeps_its_own_turn(fmt):
    events = [Say("user", "go"), Turn([Call("a")], text="t0"), Turn([Call("b")], text="t1"),
              Result("b", "late b"), Result("a", "late a")]
    assert links(fmt, events) == [("b", 1, "bash"), ("a", 0, "bash")]


@all_formats
def test_a_result_before_any_turn_declaring_its_id_is_an_orphan(fmt):
    events = [Say("user", "go"), Result("a", "too early"), Result("nowhere", "unknown id"),
              Turn([Call("a")], text="t0"), Result("a", "on time")]
    items = convert(fmt, events)
    index = fmt.index(items)
    assert [result.call_id for result in index.results] == ["a"]
    assert len(index.orphans) == 2
    assert index.results[0].location not in index.orphans


@all_formats
@pytest.mark.parametrize("call_id", ["", None, 17])
def test_a_result_without_a_string_id_is_neither_linked_nor_an_orphan(fmt, call_id):
    events = [Say("user", "go"), Turn([Call("a")], text="t0"), Result(call_id, "x")]
    index = fmt.index(convert(fmt, events))
    assert index.results == [] and index.orphans == []


@all_formats
@pytest.mark.parametrize("call_id", ["", None, 17])
def test_a_call_without_a_string_id_declares_nothing(fmt, call_id):
    events = [Say("user", "go"), Turn([Call(call_id), Call("a")], text="t0"), Result("a", "x"),
              Turn([Call(call_id)], text="t1")]
    index = fmt.index(convert(fmt, events))
    assert [turn.call_ids for turn in index.turns] == [("a",)]


@all_formats
def test_a_call_without_a_name_has_no_tool_name(fmt):
    events = [Say("user", "go"), Turn([Call("a", None)], text="t"), Result("a", "x")]
    assert links(fmt, events) == [("a", 0, None)]


@all_formats
def test_a_request_ends_where_the_next_answer_of_the_model_begins(fmt):
    """request_end_after(turn): the end of the first request that holds the
    turn and its results, which is where the model answers next (a plain
    answer or the next tool turn), or the end of the list."""
    events = [Say("user", "go"), Turn([Call("a")], text="t0"), Result("a", "x"),
              Say("assistant", "done"), Say("user", "more"), Turn([Call("b")], text="t1"),
              Result("b", "y")]
    items = convert(fmt, events)
    index = fmt.index(items)
    plain_answer = next(i for i, item in enumerate(items)
                        if isinstance(item, dict) and "done" in str(item.get("content")))
    assert plain_answer in index.answer_starts
    assert index.request_end_after(0, len(items)) == plain_answer
    assert index.request_end_after(1, len(items)) == len(items)
    assert index.answer_starts == sorted(index.answer_starts)


# OpenAI Chat Completions ------------------------------------------------------------


def test_chat_an_assistant_without_calls_is_an_answer_but_no_turn():
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "thinking", "tool_calls": []},
        {"role": "assistant", "content": None, "tool_calls": "not a list"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "a", "function": {"name": "bash"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "out"},
    ]
    index = index_chat_tool_turns(messages)
    assert [(turn.location, turn.call_ids, turn.last) for turn in index.turns] == [
        ((3,), ("a",), 3)]
    assert index.answer_starts == [1, 2, 3]


def test_chat_only_string_content_is_text_to_mask():
    parts = [{"type": "text", "text": "out"}]
    messages = [
        {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}, {"id": "c"}]},
        {"role": "tool", "tool_call_id": "a", "content": "out"},
        {"role": "tool", "tool_call_id": "b", "content": parts},
        {"role": "tool", "tool_call_id": "c"},
    ]
    index = index_chat_tool_turns(messages)
    assert [(r.text, r.content) for r in index.results] == [("out", "out"), (None, parts),
                                                            (None, None)]


def test_chat_items_that_are_not_objects_are_skipped():
    messages = [7, "text", None, {"role": "assistant", "tool_calls": [{"id": "a"}]},
                ["role", "tool"], {"role": "tool", "tool_call_id": "a", "content": "x"}]
    index = index_chat_tool_turns(messages)
    assert [r.location for r in index.results] == [(5,)] and index.answer_starts == [3]


# Anthropic Messages ---------------------------------------------------------------------


def test_anthropic_results_are_located_by_message_and_block():
    messages = [
        {"role": "assistant", "content": [
            {"type": "text", "text": "two calls"},
            {"type": "tool_use", "id": "a", "name": "bash", "input": {}},
            {"type": "tool_use", "id": "b", "name": "grep", "input": {}}]},
        {"role": "user", "content": [
            {"type": "text", "text": "here"},
            {"type": "tool_result", "tool_use_id": "a", "content": "A"},
            {"type": "tool_result", "tool_use_id": "b", "content": "B", "is_error": True},
            {"type": "tool_result", "tool_use_id": "a", "content": "A", "is_error": "true"}]},
    ]
    index = index_anthropic_tool_turns(messages)
    assert [(r.location, r.call_id, r.is_error) for r in index.results] == [
        ((1, 1), "a", False), ((1, 2), "b", True), ((1, 3), "a", False)]


def test_anthropic_text_of_a_list_joins_its_text_blocks():
    image = {"type": "image", "source": {"type": "base64", "data": "AA"}}
    content = [{"type": "text", "text": "one"}, image, {"type": "text", "text": "two"}]
    messages = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "bash"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a",
                                      "content": content}]},
    ]
    [result] = index_anthropic_tool_turns(messages).results
    assert result.text == "one\ntwo" and result.content == content


def test_anthropic_a_list_whose_later_text_block_has_a_cache_breakpoint_has_no_text():
    """Masking merges the text blocks into the first; a cache_control on a
    later one would move, so the result has no text to mask. On the first
    block it stays where it is, so that result has."""
    later = [{"type": "text", "text": "one"},
             {"type": "text", "text": "two", "cache_control": {"type": "ephemeral"}}]
    first = [{"type": "text", "text": "one", "cache_control": {"type": "ephemeral"}},
             {"type": "text", "text": "two"}]
    images_only = [{"type": "image", "source": {}}]
    messages = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": "bash"}
                                          for i in ("a", "b", "c")]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": later},
            {"type": "tool_result", "tool_use_id": "b", "content": first},
            {"type": "tool_result", "tool_use_id": "c", "content": images_only}]},
    ]
    assert [r.text for r in index_anthropic_tool_turns(messages).results] == [
        None, "one\ntwo", None]


def test_anthropic_an_assistant_message_with_string_content_is_an_answer():
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "bash"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a",
                                      "content": "out"}]},
        {"role": "assistant", "content": "Here is what I found."},
        {"role": "user", "content": "thanks"},
    ]
    index = index_anthropic_tool_turns(messages)
    assert index.answer_starts == [1, 3]
    assert index.request_end_after(0, len(messages)) == 3


# OpenAI Responses ------------------------------------------------------------------------


def call(kind: str, call_id: str, name: str | None = "bash") -> dict[str, object]:
    item: dict[str, object] = {"type": kind, "call_id": call_id}
    if name is not None:
        item["name"] = name
    return item


def output(call_id: str, value: object = "out", kind: str = "function_call_output") -> object:
    return {"type": kind, "call_id": call_id, "output": value}


def test_responses_a_run_of_call_items_is_one_turn_that_begins_with_its_answer():
    """The turn starts where the model's answer began (its reasoning and
    text come before its calls) and its last item is its last call."""
    items = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "calling"}]},
        call("function_call", "a"),
        call("custom_tool_call", "b", "apply_patch"),
        call("local_shell_call", "c", None),
        output("a"),
        output("b", kind="custom_tool_call_output"),
        output("c", kind="local_shell_call_output"),
    ]
    index = index_responses_tool_turns(items)
    assert [(t.location, t.call_ids, t.last) for t in index.turns] == [((1,), ("a", "b", "c"), 5)]
    assert [(r.call_id, r.tool_name) for r in index.results] == [
        ("a", "bash"), ("b", "apply_patch"), ("c", "local_shell")]
    assert index.answer_starts == [1]


def test_responses_an_item_between_calls_ends_the_run():
    """Calls end the model's answer: reasoning after them begins the next
    answer, and the calls after it are a turn of their own."""
    items = [call("function_call", "a"), {"type": "reasoning", "summary": []},
             call("function_call", "b"), output("a"), output("b")]
    index = index_responses_tool_turns(items)
    assert [(t.location, t.call_ids, t.last) for t in index.turns] == [
        ((0,), ("a",), 0), ((1,), ("b",), 2)]
    assert index.answer_starts == [0, 1]
    assert [r.turn for r in index.results] == [0, 1]


def test_responses_other_call_types_are_neither_turns_nor_results():
    items = [
        {"type": "computer_call", "call_id": "d", "action": {"type": "screenshot"}},
        {"type": "computer_call_output", "call_id": "d", "output": {"type": "x"}},
        {"type": "mcp_call", "id": "m", "name": "fetch", "output": "long"},
        output("never declared"),
    ]
    index = index_responses_tool_turns(items)
    assert index.turns == [] and index.results == []
    assert index.orphans == [(3,)]


def test_responses_text_of_a_list_output_joins_input_and_output_text():
    value = [{"type": "input_text", "text": "one"}, {"type": "input_image", "image_url": "x"},
             {"type": "output_text", "text": "two"}, {"type": "text", "text": "not this"}]
    items = [call("function_call", "a"), output("a", value)]
    [result] = index_responses_tool_turns(items).results
    assert result.text == "one\ntwo"


def test_responses_user_input_ends_an_answer():
    """A user message between the model's text and its calls: the calls are
    an answer of their own."""
    items = [
        {"type": "message", "role": "assistant", "content": "thinking"},
        {"type": "message", "role": "user", "content": "go on"},
        call("function_call", "a"),
        output("a"),
        {"role": "assistant", "content": "done"},  # no "type": still a message
    ]
    index = index_responses_tool_turns(items)
    assert index.answer_starts == [0, 2, 4]
    assert index.turns[0].location == (2,)
    assert index.request_end_after(0, len(items)) == 4


@all_formats
def test_an_empty_conversation_has_no_turns(fmt):
    index = fmt.index([])
    assert (index.turns, index.results, index.orphans, index.answer_starts) == ([], [], [], [])
