"""What an Anthropic request says about its prompt cache
(``conversation/billing/breakpoints.py``): the client's breakpoints, where the
frontier breakpoint may go."""

from __future__ import annotations

from obsmask_core.conversation.billing.breakpoints import (
    MAX_BREAKPOINTS,
    blocks_of,
    closing_block,
    marked,
    read_layout,
)

MARK = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def text(value: str, control: dict[str, object] | None = None) -> dict[str, object]:
    block: dict[str, object] = {"type": "text", "text": value}
    if control is not None:
        block["cache_control"] = control
    return block


def claude_code(messages: list[object], control: dict[str, object] = MARK) -> dict[str, object]:
    return {"model": "claude-sonnet-4-5", "tools": [{"name": "Bash", "description": "run"}],
            "system": [text("billing", control), text("You are Claude Code.", control)],
            "messages": messages}


def test_breakpoints_are_counted_over_tools_system_and_messages():
    body = claude_code([{"role": "user", "content": [text("hi", MARK)]}])
    body["tools"] = [{"name": "Bash", "cache_control": MARK}]
    layout = read_layout(body, body["messages"])
    assert (layout.outside_messages, layout.in_messages, layout.breakpoints) == (3, 1, 4)
    assert not layout.free_slot and MAX_BREAKPOINTS == 4


def test_a_client_whose_last_breakpoint_is_in_its_last_message_marks_the_end_of_its_request():
    """On its last block, or (Claude Code with the 5.x models) on the first
    of two blocks of a trailing system message; one in an earlier message
    does not."""
    marked_end = claude_code([{"role": "user", "content": [text("a"), text("b", MARK)]}])
    layout = read_layout(marked_end, marked_end["messages"])
    assert layout.marks_end and layout.free_slot and layout.control == MARK
    reminder = claude_code([{"role": "user", "content": [text("a")]},
                            {"role": "system", "content": [text("<total_tokens>9 left", MARK),
                                                           text("First list what you need.")]}])
    layout = read_layout(reminder, reminder["messages"])
    assert layout.marks_end and layout.in_messages == 1
    earlier = claude_code([{"role": "user", "content": [text("a", MARK), text("b")]},
                           {"role": "assistant", "content": [text("c")]}])
    layout = read_layout(earlier, earlier["messages"])
    assert not layout.marks_end and layout.in_messages == 1


def test_a_top_level_cache_control_marks_the_end_and_takes_a_slot():
    body = {"model": "m", "cache_control": HOUR,
            "messages": [{"role": "user", "content": "hi"}]}
    layout = read_layout(body, body["messages"])
    assert layout.marks_end and layout.breakpoints == 1 and layout.control == HOUR
    assert layout.long_lived


def test_a_client_without_breakpoints_among_its_messages_caches_none_of_them():
    body = claude_code([{"role": "user", "content": "hi"}])
    layout = read_layout(body, body["messages"])
    assert not layout.marks_end and layout.in_messages == 0 and layout.outside_messages == 2


def test_the_tools_and_system_are_estimated_at_four_characters_a_token_breakpoints_aside():
    body = {"model": "m", "tools": [{"name": "x" * 40}],
            "system": [text("y" * 36, MARK)], "messages": []}
    # 40 + len("text") + 36: the cache_control's "ephemeral" is not counted.
    assert read_layout(body, []).preamble_tokens == (40 + 4 + 36) // 4


def test_a_string_content_is_one_block_and_a_list_one_per_element():
    assert blocks_of({"role": "user", "content": "hi"}) == 1
    assert blocks_of({"role": "assistant", "content": [text("a"), text("b"), text("c")]}) == 3


def test_the_breakpoint_closing_an_item_goes_on_its_last_block_unless_the_api_refuses_it():
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}
    assert closing_block({"role": "assistant", "content": [text("a"), call]}) == 1
    for last in ({"type": "thinking", "thinking": "...", "signature": "s"},
                 {"type": "redacted_thinking", "data": "..."}, "not a block", {"no": "type"}):
        assert closing_block({"role": "assistant", "content": [text("a"), last]}) is None
    assert closing_block({"role": "assistant", "content": "a string"}) is None
    assert closing_block({"role": "assistant", "content": []}) is None


def test_marked_tells_a_block_that_carries_a_breakpoint():
    item = {"role": "assistant", "content": [text("a", MARK), text("b")]}
    assert marked(item, 0) and not marked(item, 1)
