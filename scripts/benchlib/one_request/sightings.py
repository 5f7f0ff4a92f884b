"""The table of when conversations were last seen, visited as the proxy
visits it: with the shipped settings (``cold_turns`` on) every request
visits it, here ``PACE_SECONDS`` after the one before (never a pause: no
request is cold)."""

from __future__ import annotations

from obsmask_core.conversation.billing.last_seen import LastSeen, Visit

PACE_SECONDS = 20.0


class Sightings:
    """A table of its own, and a clock that moves on at every visit."""

    def __init__(self) -> None:
        self._table = LastSeen()
        self._now = 0.0

    def visit(self) -> Visit:
        self._now += PACE_SECONDS
        return Visit(self._table, self._now)

    def forget(self) -> None:
        """Every conversation unseen again (a masker that forgot, too)."""
        self._table = LastSeen()
