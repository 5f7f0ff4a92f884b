"""The price models of the settings (``price_model = ...``, the bill
obsmask's decisions keep) paired with the replay's models of the same
prices (``obsmask_core.offline.cache.model``), so that the report names each model as
the settings do.

The pairs are found by their prices, not listed: a model of the settings
bills a cached and an uncached token ``read`` and ``uncached`` thousandths
of the base price, and the replay's model with those prices is its pair.
"""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.conversation.billing.price_models import PRICE_MODELS as SETTINGS_MODELS
from obsmask_core.conversation.billing.price_models import PRICE_UNIT
from obsmask_core.offline.cache.model import PRICE_MODELS as REPLAY_MODELS
from obsmask_core.offline.cache.model import SENSITIVITY_MODELS, PriceModel


@dataclass(frozen=True)
class PricedModel:
    """One price model under both names."""

    name: str  # as the settings say it
    replay: PriceModel  # the replay's model of the same prices

    @property
    def description(self) -> str:
        return self.replay.description


def _replay_model(name: str) -> PriceModel:
    model = SETTINGS_MODELS[name]
    same = [replay for replay in REPLAY_MODELS
            if round(replay.read * PRICE_UNIT) == model.read
            and round(replay.uncached * PRICE_UNIT) == model.uncached]
    if len(same) != 1:
        raise RuntimeError(f"price model {name!r}: {len(same)} replay models have its prices")
    return same[0]


PRICED_MODELS: tuple[PricedModel, ...] = tuple(
    PricedModel(name, _replay_model(name)) for name in SETTINGS_MODELS)
# Shown besides, marked as such: another reading of a cache, no settings' model.
SENSITIVITY: tuple[PriceModel, ...] = SENSITIVITY_MODELS


def priced_model(name: str) -> PricedModel:
    """The model the settings call ``name``."""
    return next(model for model in PRICED_MODELS if model.name == name)
