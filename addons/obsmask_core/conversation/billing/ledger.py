"""The bill of a conversation so far, with obsmask's past decisions and with
none, replayed from the request's own history.

Every request of a conversation holds the earlier ones as prefixes, so the
frontier replays them in order and bills each twice under the configured
price model and the provider's cache as it runs it (``cache_billing``): as
the client sent it, and as obsmask forwarded it. A move of the frontier
changes the forwarded history at its first newly masked result, and the
provider bills again what it can no longer read from its cache; the ledger
allows a move only when the bill so far with masking, this request
included, stays within ``allowance_percent`` of the bill without.

Between moves a masked request costs at most what the unmasked one does (it
reads what it read before, and is shorter by what it no longer sends), so
checking at every move keeps the bill so far within the allowance at every
request. A request the conversation came back to after the cache's lifetime
(a cold end) reads nothing, as sent or as forwarded: a move there re-bills
nothing, the masked request costs no more than the original, and the
frontier may catch up. Tokens are estimated (characters / 4 and a few per item), never
counted with an encoding, so the decision is the same whether or not one
has loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from obsmask_core.conversation.billing.cache_billing import Billing, BillingState, Forwarded
from obsmask_core.conversation.billing.prefix_billing import PrefixBilling
from obsmask_core.conversation.billing.price_models import PRICE_UNIT, PriceModel
from obsmask_core.shared.request_record import BillKey, PredictedKey

# The estimate: about 4 characters a token, and the framing of each item
# (OpenAI's cookbook counts 3).
CHARS_PER_TOKEN = 4
FRAMING_TOKENS = 3


def prefix_tokens(chars: int, items: int) -> int:
    """Estimated tokens of the first ``items`` items, ``chars`` characters of text."""
    return chars // CHARS_PER_TOKEN + FRAMING_TOKENS * items


# What the provider should report for a request: tokens read from its
# cache, written to it, and in all.
Prediction = tuple[int, int, int]


@dataclass(frozen=True)
class BillSoFar:
    """The ledger at a request, for the flow's metadata. Bills are in input
    tokens at the base price (a cached token counts as its price, 0.1 for
    Anthropic's reads): estimates, not the provider's figures. ``cache``
    names the provider's cache as the ledger ran it, and ``predicted`` what
    it expects the provider to report for this request (read from and
    written to the cache, in estimated tokens), beside the provider's own
    report (``provider_usage``)."""

    price_model: str
    requests: int
    with_masking: float
    without_masking: float
    allowance_percent: int
    cache: str = "prefix"
    predicted_read: int = 0
    predicted_written: int = 0
    predicted_input: int = 0
    # The requests (by their items) the replay billed as cold: the
    # conversation came back to them after its cache had expired.
    cold_ends: tuple[int, ...] = ()
    # The requests the conversation came back to after a pause its cache
    # may have outlived: the replay counted on no entry they did not write.
    doubtful_ends: tuple[int, ...] = ()
    # The row of the model table the request was priced under
    # (``model_table.RequestPrice.as_metadata``), when it was.
    price_row: Mapping[str, object] | None = None
    # Did this request forward a history that differs from the previous
    # forwarded one's (a move of the frontier), so that its read may fall
    # short where the request as sent would not?
    moved: bool = False
    # The request's items, and the request end from which the provider's
    # brake stopped the frontier (``brake``; None: it did not).
    request_items: int = 0
    braked_from: int | None = None
    # The digest of the request's history (``history_key``): its key in the
    # table of when conversations were last seen, where the brake adds up.
    history: str | None = None
    # This request's own estimated cost with masking and without (the last
    # one the bill so far added): what it saved, a cold one apart.
    request_with_masking: float = 0.0
    request_without_masking: float = 0.0

    @property
    def cold(self) -> bool:
        """Did this request come back after the cache's lifetime?"""
        return self.request_items in self.cold_ends

    @property
    def ratio(self) -> float | None:
        return self.with_masking / self.without_masking if self.without_masking else None

    def as_metadata(self) -> dict[str, object]:
        ratio = self.ratio
        return {
            BillKey.PRICE_MODEL: self.price_model,
            BillKey.REQUESTS: self.requests,
            BillKey.ESTIMATED_WITH_MASKING: round(self.with_masking, 1),
            BillKey.ESTIMATED_WITHOUT_MASKING: round(self.without_masking, 1),
            BillKey.RATIO: round(ratio, 4) if ratio is not None else None,
            BillKey.ALLOWANCE_PERCENT: self.allowance_percent,
            # How much of the allowance the bill so far uses (0 while
            # masking has saved more than it re-billed).
            BillKey.ALLOWANCE_USED: round(max(0.0, self.with_masking - self.without_masking), 1),
            BillKey.CACHE: self.cache,
            BillKey.PREDICTED: {PredictedKey.INPUT_TOKENS: self.predicted_input,
                                PredictedKey.CACHE_READ_TOKENS: self.predicted_read,
                                PredictedKey.CACHE_WRITE_TOKENS: self.predicted_written},
            BillKey.COLD_ENDS: list(self.cold_ends),
            BillKey.COLD: self.cold,
            **({BillKey.DOUBTFUL_ENDS: list(self.doubtful_ends)} if self.doubtful_ends else {}),
            BillKey.REQUEST_ITEMS: self.request_items,
            BillKey.REQUEST: {
                BillKey.ESTIMATED_WITH_MASKING: round(self.request_with_masking, 1),
                BillKey.ESTIMATED_WITHOUT_MASKING: round(self.request_without_masking, 1)},
            **({BillKey.HISTORY: self.history} if self.history is not None else {}),
            **({BillKey.BRAKED_FROM: self.braked_from} if self.braked_from is not None else {}),
            **({BillKey.MODEL_ROW: dict(self.price_row)} if self.price_row is not None else {}),
            BillKey.MOVED: self.moved,
        }


@dataclass(frozen=True, slots=True)
class LedgerState:
    """A ledger's running figures, to resume a replay from (``Checkpoint``)."""

    requests: int
    with_masking: int
    without_masking: int
    billing: BillingState
    alternatives: tuple[LedgerState, ...] = ()
    moved: bool = False
    last: tuple[int, int] = (0, 0)  # the last request's costs, with and without


class Ledger:
    """The two bills of a conversation, one request at a time.

    ``alternatives``: ledgers of the other terms the provider may bill the
    conversation under (a model the table does not know may be any of its
    provider's): a move is allowed only when it pays under each of them
    too, since no single row is the least favourable to masking for every
    conversation (a smaller minimum caches more, which a move re-bills; a
    larger one leaves requests uncached that the ledger counted as read).
    """

    def __init__(self, model: PriceModel, allowance_percent: int,
                 billing: Billing | None = None,
                 alternatives: Sequence[Ledger] = ()) -> None:
        self.model = model
        self.allowance_percent = allowance_percent
        self.billing: Billing = billing if billing is not None else PrefixBilling(model)
        self.alternatives = tuple(alternatives)
        self.requests = 0
        self.with_masking = 0  # in thousandths of the base price
        self.without_masking = 0
        self.moved = False  # the last request recorded changed the history
        self.last_with = self.last_without = 0  # the last request recorded's costs
        # The alternatives' plain cost of the request being judged.
        self._plain = [0] * len(self.alternatives)

    @property
    def minimum(self) -> int:
        """No masked request may be shorter than this (``Billing.minimum``,
        the largest of the alternatives')."""
        return max((self.billing.minimum,
                    *(other.billing.minimum for other in self.alternatives)))

    def smallest_saving(self, tokens: int) -> int:
        """``Billing.smallest_saving`` at a request of ``tokens``, under
        this ledger's allowance; the largest of the alternatives'."""
        return max(billing.smallest_saving(tokens, self.allowance_percent)
                   for billing in (self.billing, *(other.billing for other in self.alternatives)))

    def plain_cost(self, tokens: int, end: int = 0) -> int:
        """The next request as the client sent it (``end`` items, ``tokens``
        estimated tokens): it begins with the whole previous one."""
        self._plain = [other.plain_cost(tokens, end) for other in self.alternatives]
        return self.billing.plain_cost(end, tokens)

    def masked_cost(self, forwarded: Forwarded) -> int:
        return self.billing.masked_cost(forwarded)

    def affordable(self, masked_cost: int, plain_cost: int,
                   forwarded: Forwarded | None = None) -> bool:
        """Would the bill so far with masking stay within the allowance if
        the next request cost ``masked_cost`` (and ``plain_cost`` unmasked)?
        With ``forwarded`` (the request as it would go out), under each of
        the alternatives too (after their ``plain_cost``)."""
        spent = self.with_masking + masked_cost
        budget = self.without_masking + plain_cost
        if spent * 100 > budget * (100 + self.allowance_percent):
            return False
        return forwarded is None or all(
            other.affordable(other.masked_cost(forwarded), plain)
            for other, plain in zip(self.alternatives, self._plain, strict=True))

    def record(self, plain_tokens: int, plain_cost: int, forwarded: Forwarded,
               masked_cost: int | None = None, end: int = 0, *,
               doubtful: bool = False) -> None:
        """Add the request of ``end`` items to the bill so far, at
        ``masked_cost`` as forwarded (None: ``masked_cost(forwarded)``,
        counted as the billing records it); ``doubtful``: it came after a
        pause the provider's cache may have outlived (``Billing.doubt``)."""
        counted = self.billing.record(end, plain_tokens, forwarded)
        if masked_cost is None:
            masked_cost = counted
        self.requests += 1
        self.with_masking += masked_cost
        self.without_masking += plain_cost
        self.last_with, self.last_without = masked_cost, plain_cost
        self.moved = forwarded.changed_at is not None
        if doubtful:
            self.billing.doubt()
        for other, plain in zip(self.alternatives, self._plain, strict=True):
            other.record(plain_tokens, plain, forwarded, None, end, doubtful=doubtful)

    def expire(self) -> None:
        """The provider's cache has expired before the next request."""
        self.billing.expire()
        for other in self.alternatives:
            other.expire()

    def forget_before(self, lowest_mark: int) -> None:
        """``Billing.forget_before``, for every billing kept."""
        self.billing.forget_before(lowest_mark)
        for other in self.alternatives:
            other.forget_before(lowest_mark)

    def state(self) -> LedgerState:
        return LedgerState(self.requests, self.with_masking, self.without_masking,
                           self.billing.state(),
                           tuple(other.state() for other in self.alternatives), self.moved,
                           (self.last_with, self.last_without))

    def restore(self, state: LedgerState) -> None:
        self.requests, self.with_masking, self.without_masking, self.moved = (
            state.requests, state.with_masking, state.without_masking, state.moved)
        self.last_with, self.last_without = state.last
        for other, kept in zip(self.alternatives, state.alternatives, strict=True):
            other.restore(kept)
        self.billing.restore(state.billing)

    def so_far(self, *, price_row: Mapping[str, object] | None = None,
               cold_ends: tuple[int, ...] = (), request_items: int = 0,
               braked_from: int | None = None,
               predicted: Prediction | None = None,
               doubtful_ends: tuple[int, ...] = (), history: str | None = None) -> BillSoFar:
        """The bill so far, with what the request adds to it (as
        ``BillSoFar``'s fields; ``predicted``: the provider's figures as
        counted on the request as it goes out, else the billing's own):
        made once, as every request makes one."""
        read, written, total = predicted if predicted is not None else self.billing.predicted()
        return BillSoFar(self.model.name, self.requests, self.with_masking / PRICE_UNIT,
                         self.without_masking / PRICE_UNIT, self.allowance_percent,
                         self.billing.name, read, written, total, cold_ends=cold_ends,
                         doubtful_ends=doubtful_ends,
                         price_row=price_row, moved=self.moved, request_items=request_items,
                         braked_from=braked_from, request_with_masking=self.last_with / PRICE_UNIT,
                         request_without_masking=self.last_without / PRICE_UNIT,
                         history=history)
