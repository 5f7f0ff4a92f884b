"""What obsmask saved, at the top of the page: per conversation, one line and
one plot of the bill with obsmask over the bill without, along the session.

The estimate is the replay's (``bills``): the bill so far with masking over
the bill so far without, under the price model the conversation's policy
bills by (``auto``: Anthropic's for Anthropic Messages, OpenAI's for the
others; ``none`` when there is no cache). Where the flows hold the
provider's own usage (obsmask records it on each answer), the provider's
line puts what the provider billed beside it, like for like: over the
requests with figures, the prompt it counted (tool definitions, system and
messages, as sent), its cache reads at the model's read price, its cache
writes at the write price and the rest at the base price; over the replay's
bill without masking of the same requests, which counts the same parts of
the prompt (``estimates``). The provider's tokenizer is not the replay's:
the bill without masking is put in the provider's tokens by the ratio of
the prompt tokens it reported to the replay's count of the same requests as
they went out (``Saving.provider_scale``). Below 1, obsmask saved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.conversation.billing.price_models import PRICE_MODELS, PRICE_UNIT, for_format
from obsmask_core.offline.report.bills import ConversationBill, ModelBill
from obsmask_core.offline.report.figures import REQUEST_AXIS, Figure, Fixed, Table
from obsmask_core.offline.report.request_numbers import ProviderFigures, RequestNumbers
from obsmask_core.offline.report.svg import LinePlot, Series

RATIO_AXIS = "Bill so far with obsmask ÷ without"


def headline_model(price_model: str, anthropic: bool) -> str:
    """The price model a conversation's headline bills by."""
    return for_format(price_model, anthropic).name


def provider_cost(figures: ProviderFigures, model: str) -> float | None:
    """What the provider's counts of one request cost under ``model``, in
    input tokens at the base price (None: no prompt count)."""
    prompt = figures.prompt_tokens
    if prompt is None:
        return None
    prices = PRICE_MODELS[model]
    if not prices.has_cache:
        return float(prompt)
    cached = min(figures.cached_input_tokens or 0, prompt)
    if not figures.cache_outside_input:
        return (prices.read * cached + prices.uncached * (prompt - cached)) / PRICE_UNIT
    # Anthropic says what it wrote to the cache; the rest (after the last
    # breakpoint) is billed at the base price, as the replay bills it.
    written = min(figures.cache_creation_input_tokens or 0, prompt - cached)
    rest = prompt - cached - written
    return (prices.read * cached + prices.uncached * written + PRICE_UNIT * rest) / PRICE_UNIT


@dataclass(frozen=True)
class Saving:
    """One conversation's headline."""

    anchor: str
    title: str
    model: str  # the price model billed by, as the price_model setting names it
    requests: tuple[int, ...]
    estimate: tuple[float | None, ...]  # the ratio so far after each request
    provider: tuple[float | None, ...]  # the same from the provider's counts
    with_masking: float  # the final bills of the estimate
    without_masking: float
    provider_requests: int  # requests with the provider's counts
    # The provider's prompt tokens per token of the replay's count, over the
    # same requests as they went out (None: no request to scale by).
    provider_scale: float | None = None

    @property
    def ratio(self) -> float | None:
        return self.estimate[-1] if self.estimate else None

    @property
    def provider_ratio(self) -> float | None:
        known = [value for value in self.provider if value is not None]
        return known[-1] if known else None


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def saving(anchor: str, title: str, bill: ConversationBill, numbers: Sequence[RequestNumbers],
           price_model: str, anthropic: bool) -> Saving:
    """The headline of a conversation billed as ``bill``."""
    model = headline_model(price_model, anthropic)
    chosen: ModelBill = next(m for m in bill.models if m.name == model)
    by_number = {n.number: n for n in numbers}
    estimate = tuple(_ratio(w, wo) for w, wo in zip(chosen.with_masking,
                                                    chosen.without_masking, strict=True))
    provider: list[float | None] = []
    reported = base = 0.0
    counted_prompt = estimated_prompt = 0
    counted = 0
    previous = 0.0
    for number, without in zip(bill.request_numbers, chosen.without_masking, strict=True):
        request = by_number.get(number)
        figures = request.provider if request is not None else None
        cost = provider_cost(figures, model) if figures is not None else None
        if figures is not None and cost is not None and request is not None \
                and request.tokens_with and figures.prompt_tokens:
            reported += cost
            base += without - previous
            counted_prompt += figures.prompt_tokens
            estimated_prompt += request.tokens_with
            counted += 1
        previous = without
        provider.append(_ratio(reported, base * counted_prompt / estimated_prompt)
                        if counted else None)
    return Saving(anchor, title, model, bill.request_numbers, estimate, tuple(provider),
                  chosen.with_masking[-1] if chosen.with_masking else 0.0,
                  chosen.without_masking[-1] if chosen.without_masking else 0.0, counted,
                  counted_prompt / estimated_prompt if counted else None)


def saving_line(s: Saving) -> str:
    """One line: the estimate, then the provider's figures."""
    if s.ratio is None:
        return f"{s.title}: nothing billed."
    saved = s.without_masking - s.with_masking
    line = (f"{s.title}: with obsmask the bill is {s.ratio:.3f}× the bill without "
            f"({s.ratio - 1:+.1%}; {saved:,.0f} input tokens at the base price saved), "
            f"estimated by the replay under the “{s.model}” price model")
    if s.provider_ratio is not None and s.provider_scale is not None:
        line += (f"; from the provider's own counts ({s.provider_requests} request(s); "
                 "tool definitions, system and messages on both sides; "
                 f"{s.provider_scale:.2f} of its tokens to one of the replay's): "
                 f"{s.provider_ratio:.3f}×")
    else:
        line += "; the flows hold no usage figures of the provider"
    return line + "."


def saving_figure(s: Saving) -> Figure:
    """The ratio so far along the session, estimated and from the provider."""
    series = [Series("estimate (replay)", tuple(
        (float(n), value) for n, value in zip(s.requests, s.estimate, strict=True)
        if value is not None))]
    if s.provider_ratio is not None:
        series.append(Series("provider's counts", tuple(
            (float(n), value) for n, value in zip(s.requests, s.provider, strict=True)
            if value is not None)))
    rows = tuple((n, Fixed(e, 4) if e is not None else None,
                  Fixed(p, 4) if p is not None else None)
                 for n, e, p in zip(s.requests, s.estimate, s.provider, strict=True))
    return Figure(
        f"saved-{s.anchor}",
        LinePlot(f"{s.title}: bill with obsmask ÷ bill without", REQUEST_AXIS, RATIO_AXIS,
                 tuple(series)),
        Table(("Request", "Estimate", "Provider's counts"), rows),
        (saving_line(s), f"Below 1, obsmask saved; under the “{s.model}” price model."),
    )
