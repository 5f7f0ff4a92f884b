"""The provider's brake as the frontier's replay meets it (``billing/brake``,
``BillingTerms(braked_from=...)``): from the request end the table gives, the
frontier moves no more, in the replay of every later request alike, so that
they all forward what the request that tripped it forwarded."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Brake:
    """The request end from which the frontier stands still (None: it
    moves as the ledger allows)."""

    braked_from: int | None = None

    def holds(self, end: int) -> bool:
        """Does the brake hold the frontier at request end ``end``?"""
        return self.braked_from is not None and end >= self.braked_from

    def up_to(self, items: int) -> int | None:
        """The brake as a replay of the first ``items`` items meets it: a
        checkpoint's key, like its cold ends."""
        return self.braked_from if self.holds(items) else None
