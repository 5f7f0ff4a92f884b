"""The one error a benchmark reports and stops on: the offline tools' own
(``obsmask_core.offline.errors``), so that a benchmark stops the same way on
bad input to the replay code it shares with them."""

from __future__ import annotations

from obsmask_core.offline.errors import OfflineError as BenchError

__all__ = ["BenchError"]
