"""The tool-turn model (``turn_model``) built from each wire format's list.

The masking decision works on that model only; each wire format needs just a
function that builds it:

- OpenAI Chat Completions: a turn is an assistant message whose ``tool_calls``
  holds at least one call with a string id; a result is a ``role: "tool"``
  message.
- Anthropic Messages: a turn is an assistant message with at least one
  ``tool_use`` block; a result is a ``tool_result`` block inside a user
  message.
- OpenAI Responses: a turn is a run of consecutive call items
  (``function_call``, ``custom_tool_call``, ``local_shell_call``: parallel
  calls); a result is the matching ``*_output`` item.

In every format a result belongs to the most recent *earlier* turn that
declared its id (``turn_model.Linker``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from obsmask_core.conversation.turns.turn_model import (
    Linker,
    ToolResult,
    ToolTurn,
    ToolTurnIndex,
    call_id_of,
    dict_messages,
    name_of,
)

# Each id declared so far: the number of the latest turn that declared it,
# and the tool's name.
Declared = dict[str, tuple[int, str | None]]


@dataclass(frozen=True)
class IndexedItems:
    """The index of a list's first ``items`` items, with the ids declared
    in them: a list that begins with the same items is indexed from here,
    its added items alone (a result links to the latest earlier turn, so
    later items never change what earlier ones are). Never changed once
    made: a resumed index works on copies."""

    index: ToolTurnIndex
    declared: Declared
    items: int
    # The characters of the results' texts (what masking may replace).
    text_chars: int = 0
    # False when the items end inside something the next ones may go on
    # with (Responses: a run of calls, or an answer under way): a longer
    # list is then indexed whole.
    resumable: bool = True


def _resumed(resume: IndexedItems | None) -> tuple[ToolTurnIndex, Declared, int, int]:
    if resume is None:
        return ToolTurnIndex(), {}, 0, 0
    kept = resume.index
    index = ToolTurnIndex(list(kept.turns), list(kept.results), list(kept.orphans),
                          list(kept.answer_starts))
    return index, dict(resume.declared), resume.items, resume.text_chars


def index_chat_tool_turns(messages: Sequence[object]) -> ToolTurnIndex:
    """The tool-turn model of a Chat Completions ``messages`` list.

    Only string contents are text to mask: any other content (a list of
    parts, null) is left as it is.
    """
    return index_chat_items(messages).index


def index_chat_items(messages: Sequence[object],
                     resume: IndexedItems | None = None) -> IndexedItems:
    """``index_chat_tool_turns``, from ``resume`` (the index of the list's
    first items) if given."""
    # Every message of every request passes here, and this format is the
    # most common: the messages are walked as the Linker walks them
    # (``dict_messages``), and the steps of Linker.turn and .result are
    # written out (the same rule: a result belongs to the latest earlier
    # turn that declared its id; a property test holds it equal to the
    # Linker's way).
    index, declared, start, text_chars = _resumed(resume)
    turns, results = index.turns, index.results
    for position, message, role in dict_messages(messages, index.answer_starts, start):
        if role == "assistant":
            calls = message.get("tool_calls")
            if not calls or not isinstance(calls, list):
                continue  # no call: not a tool turn
            number = len(turns)
            ids: list[str] = []
            for call in calls:
                if not isinstance(call, dict):
                    continue
                call_id = call.get("id")
                if not isinstance(call_id, str) or not call_id:
                    continue
                function = call.get("function")
                name = function.get("name") if isinstance(function, dict) else None
                declared[call_id] = (number, name if isinstance(name, str) and name else None)
                ids.append(call_id)
            if ids:
                turns.append(ToolTurn((position,), tuple(ids), position))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                continue  # a result is only linked by a non-empty string id
            link = declared.get(call_id)
            if link is None:
                index.orphans.append((position,))
                continue
            content = message.get("content")
            text = content if isinstance(content, str) else None
            results.append(ToolResult((position,), call_id, link[0], link[1], content, text))
            if text is not None:
                text_chars += len(text)
    return IndexedItems(index, declared, len(messages), text_chars)


def text_blocks(content: object, text_types: tuple[str, ...]) -> list[dict[str, object]] | None:
    """The text blocks of a list of content blocks, or None if it has none."""
    if not isinstance(content, list):
        return None
    blocks = [
        block
        for block in content
        if isinstance(block, dict)
        and block.get("type") in text_types
        and isinstance(block.get("text"), str)
    ]
    return blocks or None


def _list_text(content: object, text_types: tuple[str, ...]) -> str | None:
    """The text of a string, or of the text blocks of a list of blocks.

    A list is maskable unless a text block that masking would remove (any but
    the first) carries ``cache_control``: moving a cache breakpoint is not a
    change obsmask makes behind the client's back.
    """
    if isinstance(content, str):
        return content
    blocks = text_blocks(content, text_types)
    if blocks is None or any("cache_control" in block for block in blocks[1:]):
        return None
    return "\n".join(str(block["text"]) for block in blocks)


ANTHROPIC_TEXT_TYPES = ("text",)


def index_anthropic_tool_turns(messages: Sequence[object]) -> ToolTurnIndex:
    """The tool-turn model of an Anthropic Messages ``messages`` list."""
    return index_anthropic_items(messages).index


def index_anthropic_items(messages: Sequence[object],
                          resume: IndexedItems | None = None) -> IndexedItems:
    """``index_anthropic_tool_turns``, from ``resume`` if given."""
    # Written out like the Chat index (the Linker's steps inline; a property
    # test holds it equal to the Linker's way).
    index, declared, start, text_chars = _resumed(resume)
    turns, results = index.turns, index.results
    for position, message, role in dict_messages(messages, index.answer_starts, start):
        blocks = message.get("content")
        if not isinstance(blocks, list):
            continue
        if role == "assistant":
            number = len(turns)
            ids: list[str] = []
            for block in blocks:
                if not isinstance(block, dict) or block.get("type") != "tool_use":
                    continue
                call_id = block.get("id")
                if not isinstance(call_id, str) or not call_id:
                    continue
                name = block.get("name")
                declared[call_id] = (number, name if isinstance(name, str) and name else None)
                ids.append(call_id)
            if ids:
                turns.append(ToolTurn((position,), tuple(ids), position))
        elif role == "user":
            for number, block in enumerate(blocks):
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                call_id = block.get("tool_use_id")
                if not isinstance(call_id, str) or not call_id:
                    continue  # a result is only linked by a non-empty string id
                link = declared.get(call_id)
                if link is None:
                    index.orphans.append((position, number))
                    continue
                content = block.get("content")
                text = _list_text(content, ANTHROPIC_TEXT_TYPES)
                results.append(ToolResult((position, number), call_id, link[0], link[1], content,
                                          text, block.get("is_error") is True))
                if text is not None:
                    text_chars += len(text)
    return IndexedItems(index, declared, len(messages), text_chars)


# Responses call items, and the output item type that answers each.
RESPONSES_CALL_TYPES: Mapping[str, str] = MappingProxyType({
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "local_shell_call_output",
})
RESPONSES_OUTPUT_TYPES = frozenset(RESPONSES_CALL_TYPES.values())
RESPONSES_TEXT_TYPES = ("input_text", "output_text")


def index_responses_tool_turns(items: Sequence[object]) -> ToolTurnIndex:
    """The tool-turn model of an OpenAI Responses ``input`` list.

    Consecutive call items form one turn. Other items (messages, reasoning,
    computer and MCP calls, which carry their output elsewhere or as images)
    end a run and are otherwise left alone.
    """
    return index_responses_items(items).index


def index_responses_items(items: Sequence[object],
                          resume: IndexedItems | None = None) -> IndexedItems:
    """``index_responses_tool_turns``, from ``resume`` if given and its
    items did not end inside a run of calls or an answer."""
    if resume is not None and not resume.resumable:
        resume = None
    index, declared, start, text_chars = _resumed(resume)
    linker = Linker(index, declared)
    results_before = len(index.results)
    run: list[tuple[str, str | None]] = []
    in_run = False
    run_start = run_last = 0
    # Where the model's current answer began (its text and reasoning items
    # come before its calls); None between answers.
    output_start: int | None = None
    for position in range(start, len(items)):
        item = items[position]
        kind = item.get("type") if isinstance(item, dict) else None
        if isinstance(item, dict) and kind in RESPONSES_CALL_TYPES:
            if not in_run:
                in_run = True
                if output_start is None:
                    output_start = position
                    index.answer_starts.append(position)
                run_start = output_start
            run_last = position
            if call_id := call_id_of(item.get("call_id")):
                name = name_of(item.get("name")) or ("local_shell" if kind == "local_shell_call"
                                                    else None)
                run.append((call_id, name))
            continue
        if in_run:
            linker.turn((run_start,), run, run_last)
            run, in_run = [], False
            output_start = None  # the calls end the answer
        is_model_output = isinstance(item, dict) and (
            kind == "reasoning" or (kind in (None, "message") and item.get("role") == "assistant")
        )
        if not is_model_output:
            output_start = None
        elif output_start is None:
            output_start = position
            index.answer_starts.append(position)
        if isinstance(item, dict) and kind in RESPONSES_OUTPUT_TYPES:
            output = item.get("output")
            linker.result(
                (position,),
                item.get("call_id"),
                output,
                _list_text(output, RESPONSES_TEXT_TYPES),
            )
    resumable = not in_run and output_start is None
    if in_run:
        linker.turn((run_start,), run, run_last)
    text_chars += sum(len(result.text) for result in index.results[results_before:]
                      if result.text is not None)
    return IndexedItems(index, linker.declared, len(items), text_chars, resumable)
