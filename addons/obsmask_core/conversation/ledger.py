"""The bill of a conversation so far, with obsmask's past decisions and with
none, replayed from the request's own history.

Every request of a conversation holds the earlier ones as prefixes, so the
frontier replays them in order and bills each twice under the configured
price model: as the client sent it (its prefix shared with the previous
request is the whole previous request), and as obsmask forwarded it (shared
up to the first result newly masked in it, or whole when nothing new was
masked). A move of the frontier re-bills what follows its first newly masked
result; the ledger allows it only when the bill so far with masking, this
request included, stays within ``allowance_percent`` of the bill without.

Between moves a masked request costs at most what the unmasked one does (it
shares a shorter prefix, but it is shorter by as much: the same new tokens
at the same price), so checking at every move keeps the bill so far within
the allowance at every request. Tokens are estimated (characters / 4 and a
few per item), never counted with an encoding, so the decision is the same
whether or not one has loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from obsmask_core.conversation.price_models import PRICE_UNIT, PriceModel

# The estimate: about 4 characters a token, and the framing of each item
# (OpenAI's cookbook counts 3).
CHARS_PER_TOKEN = 4
FRAMING_TOKENS = 3


def prefix_tokens(chars: int, items: int) -> int:
    """Estimated tokens of the first ``items`` items, ``chars`` characters of text."""
    return chars // CHARS_PER_TOKEN + FRAMING_TOKENS * items


@dataclass(frozen=True)
class BillSoFar:
    """The ledger at a request, for the flow's metadata. Bills are in input
    tokens at the base price (a cached token counts as its price, 0.1 for
    Anthropic's reads): estimates, not the provider's figures."""

    price_model: str
    requests: int
    with_masking: float
    without_masking: float
    allowance_percent: int

    @property
    def ratio(self) -> float | None:
        return self.with_masking / self.without_masking if self.without_masking else None

    def as_metadata(self) -> dict[str, object]:
        ratio = self.ratio
        return {
            "price_model": self.price_model,
            "requests": self.requests,
            "estimated_with_masking": round(self.with_masking, 1),
            "estimated_without_masking": round(self.without_masking, 1),
            "ratio": round(ratio, 4) if ratio is not None else None,
            "allowance_percent": self.allowance_percent,
            # How much of the allowance the bill so far uses (0 while
            # masking has saved more than it re-billed).
            "allowance_used": round(max(0.0, self.with_masking - self.without_masking), 1),
        }


class LedgerState(NamedTuple):
    """A ledger's running figures, to resume a replay from (``Checkpoint``)."""

    requests: int
    with_masking: int
    without_masking: int
    previous_plain: int
    previous_masked: int


class Ledger:
    """The two bills of a conversation, one request at a time."""

    def __init__(self, model: PriceModel, allowance_percent: int) -> None:
        self.model = model
        self.allowance_percent = allowance_percent
        self.requests = 0
        self.with_masking = 0  # in thousandths of the base price
        self.without_masking = 0
        self._previous_plain = 0  # tokens of the previous request, as sent
        self.previous_masked = 0  # and as forwarded

    def plain_cost(self, tokens: int) -> int:
        """The next request as the client sent it: it begins with the whole
        previous one."""
        return self.model.cost(tokens, self._previous_plain)

    def masked_cost(self, tokens: int, common_prefix: int) -> int:
        return self.model.cost(tokens, common_prefix)

    def affordable(self, masked_cost: int, plain_cost: int) -> bool:
        """Would the bill so far with masking stay within the allowance if
        the next request cost ``masked_cost`` (and ``plain_cost`` unmasked)?"""
        spent = self.with_masking + masked_cost
        budget = self.without_masking + plain_cost
        return spent * 100 <= budget * (100 + self.allowance_percent)

    def record(self, plain_tokens: int, plain_cost: int, masked_tokens: int,
               masked_cost: int) -> None:
        self.requests += 1
        self.with_masking += masked_cost
        self.without_masking += plain_cost
        self._previous_plain = plain_tokens
        self.previous_masked = masked_tokens

    def state(self) -> LedgerState:
        return LedgerState(self.requests, self.with_masking, self.without_masking,
                           self._previous_plain, self.previous_masked)

    def restore(self, state: LedgerState) -> None:
        (self.requests, self.with_masking, self.without_masking, self._previous_plain,
         self.previous_masked) = state

    def so_far(self) -> BillSoFar:
        return BillSoFar(self.model.name, self.requests, self.with_masking / PRICE_UNIT,
                         self.without_masking / PRICE_UNIT, self.allowance_percent)
