"""The figures of a measurement, per conversation and in total: the bill
without and with obsmask under each price model (the headline), the worst
bill so far, the tokens, and the provider's own figures next to the
replay's estimate.

A conversation in the holdout group (``holdout_percent``) is named as such:
the proxy leaves it unmasked, so its two bills are equal. It counts in the
total, as in the proxy's bills (the holdout is there to compare them), and
the total also gives the bill of the conversations not held out, which the
held-out ones would otherwise dilute without a word."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from obsmask_core.conversation.billing.price_models import PriceModel
from obsmask_core.offline.cache.billing import (
    SENSITIVITY_MODELS,
    SETTINGS_MODELS,
    model_description,
)
from obsmask_core.offline.cache.model import CACHE_RULES
from obsmask_core.offline.measure.bill import ConversationBill
from obsmask_core.offline.measure.comparison import RequestComparison, comparisons
from obsmask_core.offline.measure.conversations import Conversation


@dataclass(frozen=True)
class ReportedModel:
    """A price model of the report: one of the settings', or another reading
    of a cache (``sensitivity``), shown beside them."""

    prices: PriceModel
    sensitivity: bool

    @property
    def name(self) -> str:
        """As the settings call it; a sensitivity model by its own name."""
        return self.prices.name

    @property
    def description(self) -> str:
        return model_description(self.prices)


REPORTED_MODELS: tuple[ReportedModel, ...] = (
    *(ReportedModel(model, False) for model in SETTINGS_MODELS),
    *(ReportedModel(model, True) for model in SENSITIVITY_MODELS),
)


@dataclass(frozen=True)
class Bill:
    """Input tokens at the base input price, without and with obsmask."""

    without: float
    with_obsmask: float

    @property
    def ratio(self) -> float | None:
        return self.with_obsmask / self.without if self.without else None

    @property
    def saved(self) -> float:
        return self.without - self.with_obsmask

    def __add__(self, other: Bill) -> Bill:
        return Bill(self.without + other.without, self.with_obsmask + other.with_obsmask)


@dataclass(frozen=True)
class TokenFigures:
    """Tokens summed over the replayed requests, (without, with) obsmask."""

    input_tokens: tuple[int, int]
    cached: dict[str, tuple[int, int]]  # cache rule -> tokens read from the cache
    tool_results_last_request: int
    masked_last_request: int  # with obsmask

    def __add__(self, other: TokenFigures) -> TokenFigures:
        return TokenFigures(
            _pair_sum(self.input_tokens, other.input_tokens),
            {rule: _pair_sum(self.cached[rule], other.cached[rule]) for rule in self.cached},
            self.tool_results_last_request + other.tool_results_last_request,
            self.masked_last_request + other.masked_last_request,
        )


def _pair_sum(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


@dataclass(frozen=True)
class ConversationFigures:
    conversation: Conversation
    requests: int  # replayed
    bills: dict[str, Bill]  # per reported model
    worst_so_far: dict[str, tuple[float, int] | None]  # (ratio, request from 1)
    tokens: TokenFigures
    comparisons: list[RequestComparison]
    held_out: bool = False  # in the holdout group: left unmasked, as the proxy does


def conversation_figures(conversation: Conversation, bill: ConversationBill) -> ConversationFigures:
    without, with_obsmask = bill.without, bill.with_obsmask
    tokens = TokenFigures(
        (without.bill.input_tokens, with_obsmask.bill.input_tokens),
        {rule: (without.bill.cached[rule], with_obsmask.bill.cached[rule])
         for rule in CACHE_RULES},
        with_obsmask.tool_results_last_request,
        with_obsmask.masked_last_request,
    )
    return ConversationFigures(
        conversation,
        bill.requests,
        {model.name: Bill(*bill.cost(model.prices)) for model in REPORTED_MODELS},
        {model.name: bill.worst_so_far(model.prices) for model in REPORTED_MODELS},
        tokens,
        comparisons(conversation, bill),
        bill.held_out,
    )


@dataclass(frozen=True)
class TotalFigures:
    conversations: int
    requests: int  # replayed
    recorded_requests: int
    bills: dict[str, Bill]  # every conversation's, the held-out ones included
    tokens: TokenFigures
    held_out: int = 0  # conversations in the holdout group
    # The bills of the conversations not held out (all of them when none is).
    not_held_out_bills: dict[str, Bill] = field(default_factory=dict)


def _summed_bills(conversations: Sequence[ConversationFigures]) -> dict[str, Bill]:
    bills = {model.name: Bill(0.0, 0.0) for model in REPORTED_MODELS}
    for figures in conversations:
        bills = {name: bill + figures.bills[name] for name, bill in bills.items()}
    return bills


def total_figures(conversations: Sequence[ConversationFigures]) -> TotalFigures:
    tokens = TokenFigures((0, 0), dict.fromkeys(CACHE_RULES, (0, 0)), 0, 0)
    for figures in conversations:
        tokens = tokens + figures.tokens
    return TotalFigures(
        len(conversations),
        sum(figures.requests for figures in conversations),
        sum(len(figures.conversation.requests) for figures in conversations),
        _summed_bills(conversations),
        tokens,
        sum(figures.held_out for figures in conversations),
        _summed_bills([figures for figures in conversations if not figures.held_out]),
    )
