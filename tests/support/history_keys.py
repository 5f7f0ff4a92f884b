"""History keys (``history_key.HistoryKey``) for the tests of the table
of when conversations were last seen, by conversation name and request
end, without building request bodies: each request of a named
conversation is keyed ``h-<name>-<end>``, and its previous request is the
one of the largest end below it handed out so far for that name. The same
end gets the same own key again (a retry)."""

from __future__ import annotations

import bisect

from obsmask_core.conversation.billing.history_key import HistoryKey
from obsmask_core.conversation.billing.last_seen import LastSeen


class HistoryKeys:
    """The keys of the requests of named conversations, handed out in the
    order the tests send them."""

    def __init__(self) -> None:
        self._ends: dict[str, list[int]] = {}

    def of(self, name: str, end: int) -> HistoryKey:
        """The key of the request of ``end`` items of conversation ``name``."""
        ends = self._ends.setdefault(name, [])
        at = bisect.bisect_left(ends, end)
        previous = own_key(name, ends[at - 1]) if at > 0 else None
        if at == len(ends) or ends[at] != end:
            ends.insert(at, end)
        return HistoryKey(own_key(name, end), previous)

    def latest(self, name: str) -> HistoryKey:
        """The key of the request of the largest end handed out for ``name``."""
        ends = self._ends[name]
        return HistoryKey(own_key(name, ends[-1]),
                          own_key(name, ends[-2]) if len(ends) > 1 else None)


def own_key(name: str, end: int) -> str:
    """The own key of the request of ``end`` items of conversation ``name``."""
    return f"h-{name}-{end}"


def cold_ends(table: LastSeen, key: HistoryKey) -> frozenset[int]:
    """The cold ends ``table`` holds for the conversation of ``key``, read
    without a visit (none when the table does not hold it)."""
    found = table.sighting(key)
    return frozenset() if found is None else found[1].cold_ends
