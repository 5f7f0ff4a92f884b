"""Cache stability: tool results whose bytes change from one request of a
session to the next, as the upstream received them.

A provider's prompt cache keys on exact bytes, so every change of a result
already sent makes the provider bill again everything after it. A result
masked once and then left alone changes once; one rewritten again later
(compressed differently, restored, masked again) changes more than once.
A result is followed by its id (``tool_call_id``, ``tool_use_id``,
``call_id``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from benchlib.peers.wire import result_places, result_value


def _key(value: object) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@dataclass
class Stability:
    """Per session: the last bytes of each result, and the changes seen."""

    last: dict[str, bytes] = field(default_factory=dict)
    history: dict[str, set[bytes]] = field(default_factory=dict)
    changes: dict[str, int] = field(default_factory=dict)
    restored: set[str] = field(default_factory=set)

    def add(self, fmt: str, items: list[object]) -> None:
        for place in result_places(fmt, items):
            now = _key(result_value(items, place))
            before = self.last.get(place.result_id)
            if before is not None and before != now:
                self.changes[place.result_id] = self.changes.get(place.result_id, 0) + 1
                if now in self.history[place.result_id]:
                    self.restored.add(place.result_id)
            self.last[place.result_id] = now
            self.history.setdefault(place.result_id, set()).add(now)


@dataclass
class StabilityTally:
    results: int = 0
    results_changed: int = 0
    changes: int = 0
    results_changed_more_than_once: int = 0
    results_restored: int = 0  # back to bytes an earlier request had

    def add(self, stability: Stability) -> None:
        self.results += len(stability.last)
        self.results_changed += len(stability.changes)
        self.changes += sum(stability.changes.values())
        self.results_changed_more_than_once += sum(1 for n in stability.changes.values() if n > 1)
        self.results_restored += len(stability.restored)

    def merge(self, other: StabilityTally) -> None:
        for name in ("results", "results_changed", "changes", "results_changed_more_than_once",
                     "results_restored"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
