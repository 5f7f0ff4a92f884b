"""Property-based tests of the Chat Completions and Anthropic Messages
tool-turn indexes: written out for speed, each links every result exactly
as the turn model's Linker does (a result belongs to the latest earlier
turn that declared its id; one that no earlier turn declared is an
orphan), whatever the messages hold."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.turns.tool_turns import (
    ANTHROPIC_TEXT_TYPES,
    _list_text,
    index_anthropic_tool_turns,
    index_chat_tool_turns,
)
from obsmask_core.conversation.turns.turn_model import Linker, ToolTurnIndex, call_id_of, name_of


def same_index(fast: ToolTurnIndex, reference: ToolTurnIndex) -> None:
    assert fast.turns == reference.turns
    assert fast.results == reference.results
    assert fast.orphans == reference.orphans
    assert fast.answer_starts == reference.answer_starts


def linked(messages: list[object]) -> ToolTurnIndex:
    """The same index built with the Linker, step by step, as the other
    formats build theirs."""
    linker = Linker()
    for position, message, role in linker.messages(messages):
        if role == "assistant":
            calls = message.get("tool_calls")
            if not calls or not isinstance(calls, list):
                continue
            found: list[tuple[str, str | None]] = []
            for call in calls:
                if isinstance(call, dict) and (call_id := call_id_of(call.get("id"))):
                    function = call.get("function")
                    name = function.get("name") if isinstance(function, dict) else None
                    found.append((call_id, name_of(name)))
            linker.turn((position,), found)
        elif role == "tool":
            content = message.get("content")
            linker.result((position,), message.get("tool_call_id"), content,
                          content if isinstance(content, str) else None)
    return linker.index


ids = st.sampled_from(["a", "b", "c", "", None, 7])
names = st.sampled_from(["bash", "read", "", None, 3])
well_formed_calls = st.fixed_dictionaries({
    "id": ids, "type": st.just("function"),
    "function": st.one_of(st.fixed_dictionaries({"name": names}), st.none(), st.just("bash")),
})
calls = st.one_of(well_formed_calls, well_formed_calls, well_formed_calls,
                  st.sampled_from([None, "call", {}]))
contents = st.one_of(st.text(max_size=5), st.none(),
                     st.lists(st.fixed_dictionaries({"type": st.just("text"),
                                                     "text": st.text(max_size=5)}), max_size=2))
turns = st.fixed_dictionaries({"role": st.just("assistant"), "content": contents,
                               "tool_calls": st.lists(calls, min_size=1, max_size=3)})
results = st.fixed_dictionaries({"role": st.just("tool"), "content": contents,
                                 "tool_call_id": ids})
others = st.one_of(
    st.fixed_dictionaries({"role": st.just("assistant"), "content": contents},
                          optional={"tool_calls": st.sampled_from([None, "x", []])}),
    st.fixed_dictionaries({"role": st.just("tool"), "content": contents}),
    st.fixed_dictionaries({"role": st.sampled_from(["user", "system", None]),
                           "content": contents}),
    st.sampled_from([None, "text", [1]]),
)
messages = st.one_of(turns, results, results, others)


@settings(max_examples=500, deadline=None)
@given(conversation=st.lists(messages, max_size=14))
def test_the_written_out_chat_index_links_as_the_linker_does(conversation):
    same_index(index_chat_tool_turns(conversation), linked(conversation))


def linked_anthropic(messages: list[object]) -> ToolTurnIndex:
    """The Anthropic index built with the Linker."""
    linker = Linker()
    for position, message, role in linker.messages(messages):
        blocks = message.get("content")
        if not isinstance(blocks, list):
            continue
        if role == "assistant":
            found: list[tuple[str, str | None]] = []
            for block in blocks:
                if (isinstance(block, dict) and block.get("type") == "tool_use"
                        and (call_id := call_id_of(block.get("id")))):
                    found.append((call_id, name_of(block.get("name"))))
            linker.turn((position,), found)
        elif role == "user":
            for number, block in enumerate(blocks):
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                content = block.get("content")
                linker.result((position, number), block.get("tool_use_id"), content,
                              _list_text(content, ANTHROPIC_TEXT_TYPES),
                              is_error=block.get("is_error") is True)
    return linker.index


text_block = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=4)},
                                   optional={"cache_control": st.just({"type": "ephemeral"})})
uses = st.fixed_dictionaries({"type": st.just("tool_use"), "id": ids, "name": names,
                              "input": st.just({})})
tool_results = st.fixed_dictionaries(
    {"type": st.just("tool_result"), "tool_use_id": ids,
     "content": st.one_of(st.text(max_size=5), st.none(), st.lists(text_block, max_size=3))},
    optional={"is_error": st.sampled_from([True, False, "yes"])})
blocks = st.lists(st.one_of(uses, uses, tool_results, tool_results, text_block,
                            st.sampled_from([None, "x", {}])), max_size=4)
anthropic_messages = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["assistant", "user", "assistant", "user",
                                                    "system", None]),
                           "content": st.one_of(blocks, blocks, blocks, st.text(max_size=3),
                                                st.none())}),
    st.sampled_from([None, "text", [1]]),
)


@settings(max_examples=500, deadline=None)
@given(conversation=st.lists(anthropic_messages, max_size=12))
@example(conversation=[  # only a flag that is exactly true marks an error
    {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "bash"}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x",
                                  "is_error": "yes"}]}])
def test_the_written_out_anthropic_index_links_as_the_linker_does(conversation):
    same_index(index_anthropic_tool_turns(conversation), linked_anthropic(conversation))
