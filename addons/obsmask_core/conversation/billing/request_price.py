"""What one request is billed under: the price model the ``price_model``
setting and the request's ``model`` give (``model_table``), the cache rule
the ledger bills it under, and, for a model the table does not know, the
terms of every row of its provider."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from obsmask_core.conversation.billing.breakpoints import preamble_tokens
from obsmask_core.conversation.billing.model_table import CacheRule, ModelTable, RowChoice
from obsmask_core.conversation.billing.price_models import (
    AUTO,
    PRICE_MODELS,
    PRICE_UNIT,
    PriceModel,
    openai_cache,
)
from obsmask_core.shared.request_record import RowKey


@dataclass(frozen=True)
class RequestPrice:
    """What one request is billed under: the price model (the row's, or the
    one the ``price_model`` setting names), and the row chosen for its
    ``model`` (which also gives the minimum cacheable prompt)."""

    model: PriceModel
    choice: RowChoice
    cache: CacheRule  # the rule the ledger bills the request under
    # What comes before the messages in OpenAI's cache (tools and
    # instructions), in estimated tokens (Anthropic's is the layout's).
    preamble_tokens: int = 0
    # For a model the table does not know, the terms of each of its
    # provider's rows: a move must pay under each (``Ledger``).
    others: tuple[tuple[PriceModel, CacheRule], ...] = ()

    @property
    def minimum_tokens(self) -> int:
        return self.model.minimum_cached

    @property
    def cautious(self) -> bool:
        """Is the request priced under its provider's cautious row (its
        model unknown, under "auto")?"""
        return self.model.name == self.choice.row.name and not self.choice.known

    def as_metadata(self) -> dict[str, object]:
        """The row the model matched, and the terms the request was priced
        at (the row's under "auto", the named price model's otherwise)."""
        model, row = self.model, self.choice.row
        return {RowKey.ROW: model.name, RowKey.TABLE_ROW: row.name,
                RowKey.MODEL: self.choice.model, RowKey.KNOWN: self.choice.known,
                RowKey.CAUTIOUS: self.cautious, RowKey.PROVIDER: row.provider,
                RowKey.CACHE: self.cache, RowKey.READ: model.read / PRICE_UNIT,
                RowKey.WRITE: model.uncached / PRICE_UNIT,
                RowKey.WRITE_1H: (model.long_write or model.uncached) / PRICE_UNIT,
                RowKey.MINIMUM: model.minimum_cached}


def price_for_request(setting: str, table: ModelTable, *, anthropic: bool, model: object,
                      members: Mapping[str, object] | None = None) -> RequestPrice | None:
    """The prices of one request (None: no cache, every move is free).
    ``setting`` is the ``price_model`` setting: "auto" bills the request
    under its model's row; a named price model keeps its own prices, with
    the minimum of the model's row when the table knows the model.
    ``members``: the request body's, for what OpenAI's breakpoints read
    before the messages (its tools and instructions)."""
    choice = table.choose("anthropic" if anthropic else "openai", model)
    if setting == AUTO:
        cache = choice.row.cache
        preamble = preamble_tokens(members, "tools", "instructions") \
            if cache == "openai_prefix" and members is not None else 0
        return RequestPrice(choice.row.price_model(), choice, cache, preamble,
                            others=() if choice.known else table.terms_of(choice.row.provider))
    fixed = PRICE_MODELS[setting]
    if not fixed.has_cache:
        return None
    if not anthropic:
        return RequestPrice(openai_cache(fixed), choice, "openai_prefix_steps")
    minimum = choice.row.minimum if choice.known else fixed.minimum_cached
    return RequestPrice(replace(fixed, minimum_cached=minimum), choice, "anthropic_breakpoints")
