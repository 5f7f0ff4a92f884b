"""Provider answers written the way the APIs send them (field order as in the
providers' documentation and SDK types), and the usage reader of the code
under test fed chunk by chunk, as the proxy sees a streamed answer."""

from __future__ import annotations

import json

from obsmask_core.conversation.usage.provider_usage import ProviderUsage
from obsmask_core.conversation.usage.usage_stream import MAX_EVENT_BYTES, SseUsageReader

CHAT_JSON = {
    "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
    "object": "chat.completion",
    "created": 1741570283,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Voilà.", "refusal": None,
                        "annotations": []},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
    "service_tier": "default",
    "system_fingerprint": "fp_fc9f1d7035",
}


RESPONSES_USAGE = {
    "input_tokens": 5320,
    "input_tokens_details": {"cached_tokens": 4864},
    "output_tokens": 12,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 5332,
}


def responses_object(status: str, usage: object) -> dict[str, object]:
    return {
        "id": "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41",
        "object": "response",
        "created_at": 1741476777,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": "You are a coding agent.",
        "max_output_tokens": None,
        "model": "gpt-4.1-2025-04-14",
        "output": []
        if status == "in_progress"
        else [
            {
                "type": "message",
                "id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


RESPONSES_JSON = responses_object("completed", RESPONSES_USAGE)


ANTHROPIC_JSON = {
    "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hi! My name is Claude."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 12,
        "cache_creation_input_tokens": 1500,
        "cache_read_input_tokens": 24000,
        "cache_creation": {"ephemeral_5m_input_tokens": 1500, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 15,
        "service_tier": "standard",
    },
}


def read(chunks: list[bytes], content_encoding: str | None = None,
         max_event_bytes: int = MAX_EVENT_BYTES) -> SseUsageReader:
    reader = SseUsageReader(content_encoding, max_event_bytes=max_event_bytes)
    for chunk in chunks:
        reader.feed(chunk)
    reader.finish()
    return reader


def sse(*events: tuple[str | None, object], eol: str = "\n") -> bytes:
    """A stream as the servers write it: optional ``event:`` line, one ``data:`` line."""
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False,
                                                              separators=(",", ":"))
        if name is not None:
            out.append(f"event: {name}{eol}")
        out.append(f"data: {text}{eol}{eol}")
    return "".join(out).encode()


def chat_chunk(delta: dict[str, object], finish: str | None = None,
           usage: object = None, choices: bool = True) -> dict[str, object]:
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion.chunk",
        "created": 1741570283,
        "model": "gpt-4o-2024-08-06",
        "service_tier": "default",
        "system_fingerprint": "fp_fc9f1d7035",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        if choices
        else [],
        "usage": usage,
    }


CHAT_STREAM = sse(
    (None, chat_chunk({"role": "assistant", "content": "", "refusal": None})),
    (None, chat_chunk({"content": "Voilà, c’est fait"})),
    (None, chat_chunk({"content": " ✓"})),
    (None, chat_chunk({}, finish="stop")),
    (None, chat_chunk({}, usage=CHAT_JSON["usage"], choices=False)),
    (None, "[DONE]"),
)


RESPONSES_STREAM = sse(
    ("response.created", {"type": "response.created", "sequence_number": 0,
                          "response": responses_object("in_progress", None)}),
    ("response.in_progress", {"type": "response.in_progress", "sequence_number": 1,
                              "response": responses_object("in_progress", None)}),
    ("response.output_text.delta", {
        "type": "response.output_text.delta", "sequence_number": 4,
        "item_id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41",
        "output_index": 0, "content_index": 0, "delta": "Done.", "logprobs": []}),
    ("response.output_text.done", {
        "type": "response.output_text.done", "sequence_number": 5,
        "item_id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41",
        "output_index": 0, "content_index": 0, "text": "Done.", "logprobs": []}),
    ("response.completed", {"type": "response.completed", "sequence_number": 8,
                            "response": RESPONSES_JSON}),
)


def _anthropic_stream(delta_usage: dict[str, object]) -> bytes:
    message = dict(ANTHROPIC_JSON, content=[], stop_reason=None)
    message["usage"] = {
        "input_tokens": 12,
        "cache_creation_input_tokens": 1500,
        "cache_read_input_tokens": 24000,
        "output_tokens": 1,
        "service_tier": "standard",
    }
    return sse(
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hi! My name is"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": " Claude. 日本語"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": delta_usage}),
        ("message_stop", {"type": "message_stop"}),
    )


ANTHROPIC_STREAM = _anthropic_stream({"output_tokens": 15})


# Newer API versions repeat cumulative input and cache counts in message_delta.
ANTHROPIC_STREAM_CUMULATIVE = _anthropic_stream({
    "input_tokens": 12,
    "cache_creation_input_tokens": 1500,
    "cache_read_input_tokens": 24100,
    "output_tokens": 42,
})


CHAT_USAGE = ProviderUsage(input_tokens=2006, cached_input_tokens=1920, output_tokens=300)


RESPONSES_USAGE_READ = ProviderUsage(input_tokens=5320, cached_input_tokens=4864, output_tokens=12)


ANTHROPIC_USAGE = ProviderUsage(
    input_tokens=12, cached_input_tokens=24000, cache_creation_input_tokens=1500, output_tokens=15
)


STREAMS = [
    (CHAT_STREAM, CHAT_USAGE),
    (RESPONSES_STREAM, RESPONSES_USAGE_READ),
    (ANTHROPIC_STREAM, ANTHROPIC_USAGE),
    (
        ANTHROPIC_STREAM_CUMULATIVE,
        ProviderUsage(input_tokens=12, cached_input_tokens=24100,
                      cache_creation_input_tokens=1500, output_tokens=42),
    ),
]


STREAM_IDS = ["chat", "responses", "anthropic", "anthropic-cumulative-delta"]
