"""Property-based test of the Chat Completions tool-turn index: written out
for speed, it links every result exactly as the turn model's Linker does
(a result belongs to the latest earlier turn that declared its id; one
that no earlier turn declared is an orphan), whatever the messages hold."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.tool_turns import index_chat_tool_turns
from obsmask_core.conversation.turn_model import Linker, ToolTurnIndex, call_id_of, name_of


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
    fast, reference = index_chat_tool_turns(conversation), linked(conversation)
    assert fast.turns == reference.turns
    assert fast.results == reference.results
    assert fast.orphans == reference.orphans
    assert fast.answer_starts == reference.answer_starts
