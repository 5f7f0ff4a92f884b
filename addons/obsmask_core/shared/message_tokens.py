"""The strings of a conversation's messages, in document order, and the
OpenAI cookbook's estimate of a request's input tokens over them."""

from __future__ import annotations

from obsmask_core.shared.tokens import TokenCounter

# OpenAI's cookbook estimate of a chat request: every message costs 3 tokens
# of framing on top of its text, and the reply is primed with 3 more.
TOKENS_PER_MESSAGE = 3
TOKENS_REPLY_PRIMING = 3


def message_strings(message: object, ignored_keys: frozenset[str] = frozenset()) -> list[str]:
    """Every string value inside a message (role, content, content parts, tool
    call names and arguments...), in document order (the token prefix two
    versions of a message share depends on it), found with a loop, not
    recursion. Values under ``ignored_keys`` (at any depth) are left out."""
    found: list[str] = []
    pending: list[object] = [message]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            values = (value.values() if not ignored_keys
                      else [v for k, v in value.items() if k not in ignored_keys])
            pending.extend(reversed(list(values)))
        elif isinstance(value, list):
            pending.extend(reversed(value))
    return found


def estimate_input_tokens(items: list[object], counter: TokenCounter) -> int | None:
    """Input tokens of a conversation list (``messages`` or ``input``): the
    cookbook's estimate for Chat Completions, a close one for the others."""
    total = TOKENS_REPLY_PRIMING
    for message in items:
        counted = counter.count_all(message_strings(message))
        if counted is None:
            return None
        total += TOKENS_PER_MESSAGE + counted
    return total
