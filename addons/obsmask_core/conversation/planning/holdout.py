"""The holdout: a stable share of conversations that obsmask leaves unmasked,
so that a user can compare the provider's real bills between the two groups;
and the name of a conversation, by which totals and reports group requests.

A conversation is known by its first user message (the task; the system
prompt before it is the same in every conversation of an agent), which
every request of it holds: the hash of that message's text decides, so
every request of a conversation (on any proxy, after any restart) lands in
the same group. Only
string values count, and none under ``cache_control``: clients move their
cache breakpoints from request to request, and a moved breakpoint must not
move the conversation to the other group.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.shared.message_tokens import message_strings

IGNORED_KEYS = frozenset({"cache_control"})
BUCKETS = 100


def _first_user_item(items: Sequence[object]) -> object:
    for item in items:
        if isinstance(item, dict) and item.get("role") == "user":
            return item
    return items[0]


def _digest(items: Sequence[object]) -> bytes | None:
    """A hash of the first user message's text (the first item when no
    item has the user's role); None for an empty conversation."""
    if not items:
        return None
    digest = hashlib.blake2b(digest_size=8)
    for text in message_strings(_first_user_item(items), IGNORED_KEYS):
        digest.update(text.encode("utf-8", "surrogatepass") + b"\x00")
    return digest.digest()


@dataclass(frozen=True)
class ConversationName:
    """A conversation's name (``conversation_id``) and its bucket
    (``conversation_bucket``), from the one hash of its first user message."""

    id: str
    bucket: int

    def held_out(self, holdout_percent: int) -> bool:
        """Is the conversation in the holdout group (never masked)?"""
        return self.bucket < holdout_percent


def conversation_name(items: Sequence[object]) -> ConversationName | None:
    """The conversation's name and bucket; None for an empty conversation."""
    digest = _digest(items)
    if digest is None:
        return None
    return ConversationName("c-" + digest.hex()[:12], int.from_bytes(digest, "big") % BUCKETS)


# Items a model wrote: an assistant message, or an output item of the
# Responses API (a call, its reasoning).
ANSWER_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call",
                          "reasoning"})


def _is_answer(item: object) -> bool:
    return isinstance(item, dict) and (item.get("role") == "assistant"
                                       or item.get("type") in ANSWER_TYPES)


def session_id(items: Sequence[object], start: int = 0) -> str | None:
    """Which run of its conversation a request belongs to: ``s-`` and 8 hex
    digits of a hash of the model's first answer. Two runs of one task have
    one conversation name (their first user message) but answer apart, so
    the totals add up each run's bill instead of keeping one. None before
    the model's first answer (the run's first request). ``start``: the
    items before it hold no answer (read one by one: a grown request's
    kept items are not parsed again)."""
    for at in range(start, len(items)):
        if _is_answer(item := items[at]):
            digest = hashlib.blake2b(digest_size=4)
            for text in message_strings(item, IGNORED_KEYS):
                digest.update(text.encode("utf-8", "surrogatepass") + b"\x00")
            return "s-" + digest.hexdigest()
    return None


def named_by_user_message(items: Sequence[object]) -> bool:
    """Is the conversation named by a user message among ``items`` (then
    every list that begins with them has the same name)?"""
    return any(isinstance(item, dict) and item.get("role") == "user" for item in items)


def conversation_bucket(items: Sequence[object]) -> int | None:
    """0 to 99 from the first user message's text; None for an empty
    conversation."""
    name = conversation_name(items)
    return None if name is None else name.bucket


def conversation_id(items: Sequence[object]) -> str | None:
    """The conversation's name: ``c-`` and 12 hex digits of the hash that
    also gives its bucket, the same for every request of it and on every
    proxy. A hash, so it tells nothing of the text. None when empty."""
    name = conversation_name(items)
    return None if name is None else name.id


def held_out(items: Sequence[object], holdout_percent: int) -> bool:
    """Is this conversation in the holdout group (never masked)?"""
    if holdout_percent <= 0:
        return False
    bucket = conversation_bucket(items)
    return bucket is not None and bucket < holdout_percent
