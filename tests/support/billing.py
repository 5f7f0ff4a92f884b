"""The bill of a conversation's requests, re-billed here apart from the
ledger: each request's tokens estimated with the same ``prefix_tokens``
(characters / 4 and 3 per item), of which those of the longest run of whole
items it begins with in common with the previous request are served from
the cache, under the same price model.

The ledger works from the plan (how much it thinks masking freed, where it
thinks the first change is); this works from the lists themselves, as a
provider would see them."""

from __future__ import annotations

import json

from obsmask_core.conversation.billing.ledger import prefix_tokens
from obsmask_core.conversation.billing.price_models import PRICE_MODELS


def chars_of(value: object) -> int:
    """Characters of every string value inside an item (keys excluded)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(chars_of(v) for v in value.values())
    if isinstance(value, list):
        return sum(chars_of(v) for v in value)
    return 0


def common_prefix(old: list[object], new: list[object]) -> tuple[int, int]:
    """The longest run of whole items both requests begin with: (characters,
    items). Item by item, like the ledger: a provider caches tokens, so it may
    share a little more (the start of the first differing item), never less."""
    chars = items = 0
    for a, b in zip(old, new, strict=False):
        if json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
            break
        chars += chars_of(a)
        items += 1
    return chars, items


def rebill(requests: list[list[object]], price_model: str) -> list[int]:
    """The bill of each request in turn, in thousandths of the base price."""
    model = PRICE_MODELS[price_model]
    bills: list[int] = []
    previous: list[object] = []
    for items in requests:
        tokens = prefix_tokens(sum(chars_of(item) for item in items), len(items))
        shared = prefix_tokens(*common_prefix(previous, items)) if previous else 0
        bills.append(model.cost(tokens, shared))
        previous = items
    return bills


def so_far(bills: list[int]) -> list[int]:
    """The bill so far after each request."""
    total, out = 0, []
    for bill in bills:
        total += bill
        out.append(total)
    return out
