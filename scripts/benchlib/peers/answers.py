"""The recording upstream's answers: a plausible non-streaming answer of each
format, an assistant message with a short text, and its usage.

The usage's input count is the request body's length over four (a rough
token count, as a provider would report a real one): a proxy that rewrites
the usage of the answers it passes back (to report what the client sent
rather than what it forwarded) shows up as a change in the answers.
"""

from __future__ import annotations

import json

from benchlib.peers.wire import ANTHROPIC, CHAT, RESPONSES

ANSWER_TEXT = "I have read the output. Next I will look at the file the error points to."
OUTPUT_TOKENS = 18
_BYTES_PER_TOKEN = 4


def input_tokens(body: bytes) -> int:
    return max(1, len(body) // _BYTES_PER_TOKEN)


def _chat(number: int, model: str, prompt: int) -> dict[str, object]:
    return {
        "id": f"chatcmpl-bench-{number}", "object": "chat.completion", "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": ANSWER_TEXT}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": OUTPUT_TOKENS,
                  "total_tokens": prompt + OUTPUT_TOKENS,
                  "prompt_tokens_details": {"cached_tokens": 0}},
    }


def _anthropic(number: int, model: str, prompt: int) -> dict[str, object]:
    return {
        "id": f"msg_bench_{number}", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": ANSWER_TEXT}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": OUTPUT_TOKENS,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    }


def _responses(number: int, model: str, prompt: int) -> dict[str, object]:
    return {
        "id": f"resp_bench_{number}", "object": "response", "created_at": 1700000000,
        "status": "completed", "model": model,
        "output": [{"type": "message", "id": f"msg_bench_{number}", "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": ANSWER_TEXT,
                                 "annotations": []}]}],
        "usage": {"input_tokens": prompt, "output_tokens": OUTPUT_TOKENS,
                  "total_tokens": prompt + OUTPUT_TOKENS,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }


_MAKERS = {CHAT: _chat, ANTHROPIC: _anthropic, RESPONSES: _responses}


def answer(fmt: str, number: int, body: bytes) -> bytes:
    """The answer to the ``number``-th request of format ``fmt``, ``body`` its
    request body as received."""
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    model = document.get("model") if isinstance(document, dict) else None
    made = _MAKERS[fmt](number, model if isinstance(model, str) else "bench", input_tokens(body))
    return json.dumps(made).encode()
