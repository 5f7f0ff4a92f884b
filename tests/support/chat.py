"""Builders for Chat Completions conversations used by the tests."""

from __future__ import annotations

import json

Message = dict[str, object]

LONG_OUTPUT = "\n".join(f"line {n}: some ordinary tool output" for n in range(60))


def system(text: str = "You are a coding agent.") -> Message:
    return {"role": "system", "content": text}


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def tool_turn(*call_ids: str, name: str = "bash", content: str | None = None) -> Message:
    """An assistant message calling one tool per id (several: parallel calls)."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps({"command": f"run {call_id}"})},
            }
            for call_id in call_ids
        ],
    }


def tool_result(call_id: str, content: object = None) -> Message:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": LONG_OUTPUT + f"\n({call_id})" if content is None else content,
    }


def conversation(turns: int, calls_per_turn: int = 1, name: str = "bash") -> list[Message]:
    """system + user, then ``turns`` tool turns each followed by its results."""
    messages: list[Message] = [system(), user("Fix the bug.")]
    for turn in range(turns):
        ids = [f"call_{turn}_{n}" for n in range(calls_per_turn)]
        messages.append(tool_turn(*ids, name=name))
        messages.extend(tool_result(call_id) for call_id in ids)
    return messages


def body(messages: list[Message], **extra: object) -> bytes:
    return json.dumps({"model": "m", "messages": messages, **extra}).encode()
