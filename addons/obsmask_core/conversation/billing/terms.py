"""What the ledger bills one request under, besides the masking policy:
the provider's cache as the request lays it out, the turns at which the
conversation came back cold, the request's prices, and where the
provider's brake holds the frontier. Made once per request and handed
down whole, so that the planner, the frontier and the forwarded requests
agree on them."""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.conversation.billing.breakpoints import CacheLayout
from obsmask_core.conversation.billing.request_price import RequestPrice


@dataclass(frozen=True)
class BillingTerms:
    """``layout``: an Anthropic request's cache breakpoints
    (``breakpoints.read_layout``): the ledger then bills under Anthropic's
    cache, and the plan may add the frontier breakpoint; without one,
    OpenAI's. ``cold_ends``: the request ends (numbers of items) at which
    the conversation came back after the cache's lifetime (``last_seen``),
    billed as read from no cache. ``price``: the request's prices, from its
    model's row (``model_table``); without one, those the policy's price
    model names. ``braked_from``: the request end from which the provider's
    brake holds the frontier (``brake``). ``doubtful_ends``: the request
    ends at which the conversation came back after a pause the cache may
    or may not have outlived (``last_seen``): after each, the ledger counts
    on no entry that request did not write again. ``history``: the digest
    of the request's history (``history_key``), which its bill names."""

    layout: CacheLayout | None = None
    cold_ends: frozenset[int] = frozenset()
    price: RequestPrice | None = None
    braked_from: int | None = None
    doubtful_ends: frozenset[int] = frozenset()
    history: str | None = None


# No layout (OpenAI's cache), nothing cold, the policy's prices, no brake.
PLAIN_TERMS = BillingTerms()
