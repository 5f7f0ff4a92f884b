"""The provider's word as a brake: what its reported cache figures cost
beyond the ledger's prediction (the surprise), and when a conversation's
bill so far, as the provider reported it, has gone past what the ledger
allowed.

The ledger bills every request of a conversation under the provider's
cache as its documentation describes it, and predicts what the provider
should report for each (``BillSoFar.predicted``). A provider whose cache
reads less than that (a lookback shorter than documented, an entry evicted
early) bills more than the ledger counted, and the ledger, which sees only
requests, goes on allowing moves that re-bill what it takes for read.
Each answer's read is compared with the prediction's, in the ledger's
units (tokens estimated by the ledger: the reported ones scaled by
predicted input over reported input), and what the provider read less
than predicted, billed again at the write price instead of the read
price, is the request's surprise. Only reads count, and only a clear
shortfall: how the rest of the prompt splits between written and plain
input follows the density of its new text, which the ledger estimates
from characters and the provider counts in tokens, and a read a few
percent short is that noise too. An answer that read nothing while a read
was predicted, on a request that forwarded the same history as the one
before it, met an expired or evicted cache (a pause, a routing miss),
which the request as the client sent it would have met alike: it is no
surprise either (on a request that moved the frontier, it is counted).
The surprise is never negative: a provider that reads more than predicted
earns masking nothing back.

The conversation's surprise is the sum over its requests. The brake trips
when the ledger's bill with masking plus that sum goes past the bill
without masking and its allowance: from the next request on, the frontier
stops (``BillingTerms(braked_from=...)``): what is masked stays masked, since
unmasking it would re-bill the prompt after it too. Pure: the table keeps
the sums (``last_seen``), the proxy reads the figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from obsmask_core.conversation.billing.price_models import PRICE_MODELS, PRICE_UNIT
from obsmask_core.shared.read_back import amount, count
from obsmask_core.shared.request_record import BillKey, PredictedKey, RowKey, UsageKey


@dataclass(frozen=True, slots=True)
class CacheBill:
    """A request's input as one cache bills it: tokens read from the cache,
    written to it, and the rest (plain input), in one count of tokens."""

    read: int
    written: int
    plain: int

    @property
    def total(self) -> int:
        return self.read + self.written + self.plain


@dataclass(frozen=True, slots=True)
class Prices:
    """A read and a write, in units of the base input price."""

    read: float
    write: float


# A read short of the prediction by at most this share of it is the
# estimate's noise, not a cache that reads less than the ledger assumes.
READ_TOLERANCE_PERCENT = 10


def request_surprise(predicted: CacheBill, reported: CacheBill, prices: Prices,
                     *, moved: bool = False) -> float:
    """What the provider billed beyond the prediction because its cache
    read less than the ledger took for read, in the ledger's units (the
    reported read scaled to the predicted input: the provider counts real
    tokens, the ledger estimates them); see the module for what is left
    out."""
    if reported.total <= 0 or predicted.total <= 0 or predicted.read <= 0 \
            or (reported.read <= 0 and not moved):
        return 0.0
    read = reported.read * predicted.total / reported.total
    short = predicted.read - read
    if short * 100 <= predicted.read * READ_TOLERANCE_PERCENT:
        return 0.0
    return short * (prices.write - prices.read)


def room(with_masking: float, without_masking: float, allowance_percent: int) -> float:
    """How much surprise the ledger's bill so far leaves room for before
    it goes past the allowance: the brake trips above this."""
    return without_masking * (100 + allowance_percent) / 100 - with_masking


def trips(with_masking: float, without_masking: float, allowance_percent: int,
          surprise: float) -> bool:
    """Has the bill so far, the provider's surprise counted, gone past the
    bill without masking and its allowance?"""
    return surprise > room(with_masking, without_masking, allowance_percent)


# Reading the flow's figures -----------------------------------------------------------


def predicted_figures(bill: Mapping[str, object]) -> CacheBill | None:
    """The ledger's prediction for the request (its bill's ``predicted``)."""
    predicted = bill.get(BillKey.PREDICTED)
    if not isinstance(predicted, Mapping):
        return None
    total, read, written = (count(predicted.get(key)) for key in
                            (PredictedKey.INPUT_TOKENS, PredictedKey.CACHE_READ_TOKENS,
                             PredictedKey.CACHE_WRITE_TOKENS))
    if total is None or read is None or written is None or read + written > total:
        return None
    return CacheBill(read, written, total - read - written)


def reported_figures(usage: Mapping[str, object], *, anthropic: bool) -> CacheBill | None:
    """The provider's report (``ProviderUsage.as_metadata``): Anthropic's
    ``input_tokens`` is the plain input alone, OpenAI's the whole prompt
    (its cached and written tokens among them). None when the report
    does not say what was read."""
    total = count(usage.get(UsageKey.INPUT_TOKENS))
    read = count(usage.get(UsageKey.CACHED_INPUT_TOKENS))
    written = count(usage.get(UsageKey.CACHE_CREATION_INPUT_TOKENS)) or 0
    if total is None or read is None:
        return None
    if anthropic:
        return CacheBill(read, written, total)
    if read + written > total:
        return None
    return CacheBill(read, written, total - read - written)


def bill_prices(bill: Mapping[str, object]) -> Prices | None:
    """The prices the ledger billed the request at: its model's row, or
    the named price model."""
    row = bill.get(BillKey.MODEL_ROW)
    if isinstance(row, Mapping):
        read, write = amount(row.get(RowKey.READ)), amount(row.get(RowKey.WRITE))
        if read is not None and write is not None:
            return Prices(read, write)
    model = PRICE_MODELS.get(str(bill.get(BillKey.PRICE_MODEL)))
    if model is None:
        return None
    return Prices(model.read / PRICE_UNIT, model.uncached / PRICE_UNIT)


@dataclass(frozen=True, slots=True)
class AnswerWeighed:
    """One answer's figures against its request's bill: its surprise, and
    the ledger's bill so far to weigh the conversation's surprise with."""

    surprise: float
    with_masking: float
    without_masking: float
    allowance_percent: int
    request_items: int

    @property
    def room(self) -> float:
        return room(self.with_masking, self.without_masking, self.allowance_percent)


def reading(bill: Mapping[str, object], usage: Mapping[str, object], *,
            anthropic: bool) -> AnswerWeighed | None:
    """The reading of one answer; None when a figure is missing or not a
    number (nothing is then changed)."""
    predicted = predicted_figures(bill)
    reported = reported_figures(usage, anthropic=anthropic)
    prices = bill_prices(bill)
    with_masking = amount(bill.get(BillKey.ESTIMATED_WITH_MASKING))
    without_masking = amount(bill.get(BillKey.ESTIMATED_WITHOUT_MASKING))
    allowance = count(bill.get(BillKey.ALLOWANCE_PERCENT))
    items = count(bill.get(BillKey.REQUEST_ITEMS))
    if predicted is None or reported is None or prices is None or with_masking is None \
            or without_masking is None or allowance is None or not items:
        return None
    surprise = request_surprise(predicted, reported, prices, moved=bill.get(BillKey.MOVED) is True)
    return AnswerWeighed(surprise, with_masking, without_masking, allowance, items)
