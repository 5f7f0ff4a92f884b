"""The bodies a proxy forwarded for one session, billed as bench_cache bills
obsmask's: each body read as a prompt (``obsmask_core.offline.cache.prompts``: blocks in
cache order, cl100k_base tokens, its breakpoints), at the session's time for
that request (one every 20 s, not the bench's wall clock), under every cache
model of ``obsmask_core.offline.cache.model`` and every price model of
``obsmask_core.offline.cache.billing``, with caches of its own per proxy and
session.

A request the upstream never received (the proxy answered it itself, or
failed) costs nothing and leaves the caches as they were; the report counts
such requests apart, so that they are never mistaken for savings.
"""

from __future__ import annotations

from collections.abc import Sequence

from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.offline.cache.billing import SessionBill
from obsmask_core.offline.cache.block_tokens import MessageTokens
from obsmask_core.offline.cache.clients import Request
from obsmask_core.offline.cache.model import (
    CACHE_RULES,
    AnthropicRequest,
    PromptCaches,
    RequestBill,
)
from obsmask_core.offline.cache.prompt_blocks import Prompt
from obsmask_core.offline.cache.prompts import ItemReadings, PromptReader

NOTHING_BILLED = RequestBill(0, 0, dict.fromkeys(CACHE_RULES, 0), AnthropicRequest(0, 0, 0, 0))


class SessionBiller:
    """One proxy's bill of one session, request after request."""

    def __init__(self, fmt: WireFormat, tokens: MessageTokens,
                 client_items: Sequence[object]) -> None:
        self._reader = PromptReader(ItemReadings(fmt, tokens, client_items))
        self._caches = PromptCaches()
        self._previous: Prompt | None = None
        self.bill = SessionBill()

    def add(self, request: Request | None, time: float) -> None:
        if request is None:
            self.bill.add(NOTHING_BILLED)
            return
        self._previous = self._reader.read(request).prompt(time, self._previous)
        self.bill.add(self._caches.bill(self._previous))
