"""One conversation, written in each of the three wire formats.

Tests describe a conversation once, as a list of events, and get it as an
OpenAI Chat Completions ``messages`` list, an Anthropic Messages ``messages``
list, or an OpenAI Responses ``input`` list. The readers at the end take
tool results back out of each format; they are written here, apart from the
addon's code, so the tests do not check the addon against itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from support.chat import LONG_OUTPUT

FORMATS = (CHAT, ANTHROPIC, RESPONSES)
FORMAT_IDS = [fmt.name for fmt in FORMATS]


@dataclass
class Say:
    role: str
    text: str


@dataclass
class Call:
    id: object
    name: str | None = "bash"
    # The call's arguments: a JSON value (written out for Chat and
    # Responses, as the object itself for Anthropic), or the text the
    # client wrote.
    arguments: object = field(default_factory=lambda: {"c": 1})

    def arguments_text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)

    def arguments_value(self) -> object:
        return json.loads(self.arguments) if isinstance(self.arguments, str) else self.arguments


@dataclass
class Turn:
    calls: list[Call]
    text: str | None = None


@dataclass
class Result:
    call_id: object
    content: object
    is_error: bool = False
    extra: dict[str, object] = field(default_factory=dict)


Event = Say | Turn | Result


def session(turns: int, calls_per_turn: int = 1, name: str = "bash") -> list[Event]:
    """A user prompt, then ``turns`` tool turns, each followed by its results."""
    events: list[Event] = [Say("user", "Fix the bug.")]
    for turn in range(turns):
        ids = [f"call_{turn}_{n}" for n in range(calls_per_turn)]
        events.append(Turn([Call(i, name) for i in ids], text=f"turn {turn}"))
        events.extend(Result(i, f"{LONG_OUTPUT}\n({i})") for i in ids)
    return events


def to_chat(events: list[Event]) -> list[object]:
    out: list[object] = []
    for event in events:
        if isinstance(event, Say):
            out.append({"role": event.role, "content": event.text})
        elif isinstance(event, Turn):
            calls = []
            for call in event.calls:
                entry: dict[str, object] = {"id": call.id, "type": "function"}
                if call.name is not None:
                    entry["function"] = {"name": call.name, "arguments": call.arguments_text()}
                calls.append(entry)
            out.append({"role": "assistant", "content": event.text, "tool_calls": calls})
        else:
            out.append({"role": "tool", "tool_call_id": event.call_id, "content": event.content,
                        **event.extra})
    return out


def to_anthropic(events: list[Event]) -> list[object]:
    """Consecutive results share one user message, as the API requires."""
    out: list[object] = []
    for event in events:
        if isinstance(event, Say):
            role = "assistant" if event.role == "assistant" else "user"
            out.append({"role": role, "content": [{"type": "text", "text": event.text}]})
        elif isinstance(event, Turn):
            blocks: list[object] = []
            if event.text:
                blocks.append({"type": "text", "text": event.text})
            for call in event.calls:
                block: dict[str, object] = {"type": "tool_use", "id": call.id,
                                             "input": call.arguments_value()}
                if call.name is not None:
                    block["name"] = call.name
                blocks.append(block)
            out.append({"role": "assistant", "content": blocks})
        else:
            block = {"type": "tool_result", "tool_use_id": event.call_id, **event.extra}
            if event.content is not None:
                block["content"] = event.content
            if event.is_error:
                block["is_error"] = True
            last = out[-1] if out else None
            if (
                isinstance(last, dict)
                and last["role"] == "user"
                and all(b.get("type") == "tool_result" for b in last["content"])
            ):
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    return out


def marked_as_claude_code(items: list[object]) -> list[object]:
    """Anthropic items as Claude Code sends them: a breakpoint
    (``cache_control``) on the last block of the last message (a string
    content becomes one text block for it). The input is not modified."""
    if not items or not isinstance(items[-1], dict):
        return list(items)
    last = dict(items[-1])
    content = last.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) \
        else list(content) if isinstance(content, list) else []
    if not blocks or not isinstance(blocks[-1], dict):
        return list(items)
    blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    last["content"] = blocks
    return [*items[:-1], last]


CLAUDE_CODE_SYSTEM = [
    {"type": "text", "text": "You are a coding agent.",
     "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "Use the tools to inspect and change the repository. " * 40,
     "cache_control": {"type": "ephemeral"}},
]


def claude_code_body(items: list[object], model: str = "claude-sonnet-4-5") -> dict[str, object]:
    """The members of an Anthropic request as Claude Code sends it: its two
    marked system blocks, then ``items`` (``marked_as_claude_code``)."""
    return {"model": model, "max_tokens": 1024, "system": CLAUDE_CODE_SYSTEM,
            "messages": marked_as_claude_code(items)}


def to_responses(events: list[Event]) -> list[object]:
    out: list[object] = []
    for event in events:
        if isinstance(event, Say):
            kind = "output_text" if event.role == "assistant" else "input_text"
            out.append({"type": "message", "role": event.role,
                        "content": [{"type": kind, "text": event.text}]})
        elif isinstance(event, Turn):
            if event.text:
                out.append({"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": event.text}]})
            for number, call in enumerate(event.calls):
                item: dict[str, object] = {
                    "type": "function_call", "id": f"fc_{number}_{call.id}", "call_id": call.id,
                    "arguments": call.arguments_text(),
                }
                if call.name is not None:
                    item["name"] = call.name
                out.append(item)
        else:
            out.append({"type": "function_call_output", "call_id": event.call_id,
                        "output": event.content, **event.extra})
    return out


CONVERTERS = {"chat": to_chat, "anthropic": to_anthropic, "responses": to_responses}


def convert(fmt: WireFormat, events: list[Event]) -> list[object]:
    return CONVERTERS[fmt.name](events)


def result_values(fmt: WireFormat, items: list[object]) -> list[tuple[object, object]]:
    """(call id, value) of every tool result in the list, in order."""
    found: list[tuple[object, object]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if fmt is CHAT and item.get("role") == "tool":
            found.append((item.get("tool_call_id"), item.get("content")))
        elif fmt is ANTHROPIC and isinstance(item.get("content"), list):
            for block in item["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found.append((block.get("tool_use_id"), block.get("content")))
        elif fmt is RESPONSES and str(item.get("type", "")).endswith("_call_output"):
            found.append((item.get("call_id"), item.get("output")))
    return found


def changed_results(fmt: WireFormat, before: list[object], after: list[object]) -> list[object]:
    """Call ids of the results whose value differs between the two lists."""
    pairs = zip(result_values(fmt, before), result_values(fmt, after), strict=True)
    return [old_id for (old_id, old), (_new_id, new) in pairs if old != new]


def skeleton(fmt: WireFormat, items: list[object]) -> list[object]:
    """The list with every tool result's value blanked: what masking must
    leave exactly as it was (item count and order, ids, calls, fields)."""
    blanked = json.loads(json.dumps(items))
    for item in blanked:
        if not isinstance(item, dict):
            continue
        if fmt is CHAT and item.get("role") == "tool" and "content" in item:
            item["content"] = "<result>"
        elif fmt is ANTHROPIC and isinstance(item.get("content"), list):
            for block in item["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    if "content" in block:
                        block["content"] = "<result>"
        elif fmt is RESPONSES and str(item.get("type", "")).endswith("_call_output"):
            if "output" in item:
                item["output"] = "<result>"
    return blanked


def text_of(value: object) -> str | None:
    """A result value's text: a string, or the joined text blocks of a list."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [b["text"] for b in value if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(texts) if texts else None
    return None
