"""The one log line for a request model the model table does not know."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from obsmask_core.shared.request_record import RowKey

logger = logging.getLogger(__name__)
# Unknown models told apart at most (a client may send any name).
UNKNOWN_MODELS_TOLD = 1000


class UnknownModels:
    """The models already told of, so each is told once."""

    def __init__(self) -> None:
        self._told: set[str] = set()

    def tell(self, row: Mapping[str, object] | None) -> bool:
        """Log the first request that names a model the table does not know
        (``row``: the bill's ``model_row``): it is billed under its
        provider's most cautious terms. True when it logged."""
        if row is None or row.get(RowKey.CAUTIOUS) is not True:
            return False
        model = row.get(RowKey.MODEL)
        name = str(model) if model is not None else "(none)"
        if name in self._told or len(self._told) >= UNKNOWN_MODELS_TOLD:
            return False
        self._told.add(name)
        logger.info("obsmask: model %s is not in the model table: billed under %s, the "
                    "most cautious terms of its provider (model_prices adds a row: "
                    "docs/models.md)", name, row.get(RowKey.ROW))
        return True
