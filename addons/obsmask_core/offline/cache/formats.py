"""What each wire format means to the replay: which list of a request body is
the conversation, what stands in front of it, and where a request ends.

A request ends just before each answer of the model, and the whole list is
the last request:

- Chat Completions and Anthropic Messages: before every message with role
  ``assistant``;
- OpenAI Responses: the model's answer is a run of items it produced
  (``reasoning``, a message with role ``assistant``, call items such as
  ``function_call``); a request ends before the first item of each run.

Anthropic's top-level ``system`` and Responses' ``instructions`` are not in
the list but are sent with every request, in front of it (Chat Completions
has its system prompt in the list); the body's other members (model, tool
definitions...) too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from obsmask_core.conversation.turns.tool_turns import RESPONSES_CALL_TYPES
from obsmask_core.conversation.turns.wire_formats import (
    ANTHROPIC,
    CHAT,
    FORMATS,
    RESPONSES,
    WireFormat,
)

FORMAT_NAMES = tuple(FORMATS)  # chat, anthropic, responses
# The top-level member sent in front of the list, per format.
PREAMBLE_MEMBERS: Mapping[str, str] = MappingProxyType(
    {ANTHROPIC.name: "system", RESPONSES.name: "instructions"})
_ANTHROPIC_TOOL_BLOCKS = ("tool_use", "tool_result")


def _is_model_output(item: object, fmt: WireFormat) -> bool:
    if not isinstance(item, dict):
        return False
    if fmt is not RESPONSES:
        return item.get("role") == "assistant"
    kind = item.get("type")
    return (kind in RESPONSES_CALL_TYPES or kind == "reasoning"
            or (kind in (None, "message") and item.get("role") == "assistant"))


def request_ends(items: Sequence[object], fmt: WireFormat) -> list[int]:
    """Every prefix that ends just before an answer of the model, and the whole list."""
    ends = []
    previous_was_output = False
    for position, item in enumerate(items):
        output = _is_model_output(item, fmt)
        if output and position > 0 and (fmt is not RESPONSES or not previous_was_output):
            ends.append(position)
        previous_was_output = output
    if items and (not ends or ends[-1] != len(items)):
        ends.append(len(items))
    return ends


def body_format(document: object) -> WireFormat | None:
    """The format of a request body, from its top-level members and block
    types: a list ``input`` is Responses; ``messages`` with a top-level
    ``system`` or with ``tool_use``/``tool_result`` blocks is Anthropic, any
    other ``messages`` Chat Completions; None for anything else."""
    if not isinstance(document, dict):
        return None
    if isinstance(document.get("input"), list):
        return RESPONSES
    messages = document.get("messages")
    if not isinstance(messages, list):
        return None
    if "system" in document:
        return ANTHROPIC
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") in _ANTHROPIC_TOOL_BLOCKS
            for block in content
        ):
            return ANTHROPIC
    return CHAT


def conversation(document: object, fmt: WireFormat) -> tuple[list[object], object]:
    """(the conversation list, what is sent in front of it or None); ValueError
    if ``document`` is no request body of ``fmt``."""
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    items = document.get(fmt.list_member)
    if not isinstance(items, list):
        raise ValueError(f"no {fmt.list_member!r} list")
    member = PREAMBLE_MEMBERS.get(fmt.name)
    return items, document.get(member) if member is not None else None


def other_members(document: object, fmt: WireFormat) -> dict[str, object]:
    """A body's top-level members but its list and what ``conversation``
    reads in front of it, in their order."""
    if not isinstance(document, dict):
        return {}
    left_out = {fmt.list_member, PREAMBLE_MEMBERS.get(fmt.name)}
    return {key: value for key, value in document.items() if key not in left_out}
