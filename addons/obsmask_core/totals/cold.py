"""Cold turns in the totals: the saving on requests that came back after the
provider's cache had expired (``cold_turns``), apart from the saving on
warm ones. One flow's facts (its bill's ``cold`` and ``request``, read back
with a check of every value) and their sums."""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.shared.read_back import amount, mapping
from obsmask_core.shared.request_record import BillKey


@dataclass(frozen=True)
class TurnFacts:
    """A request with a bill: did it come back cold, and what did it cost
    by the ledger's estimate (tokens at the base price), with masking and
    without."""

    cold: bool
    with_masking: float
    without_masking: float

    @classmethod
    def read(cls, bill: object) -> TurnFacts | None:
        facts = mapping(bill)
        cost = mapping(facts.get(BillKey.REQUEST))
        with_masking = amount(cost.get(BillKey.ESTIMATED_WITH_MASKING))
        without_masking = amount(cost.get(BillKey.ESTIMATED_WITHOUT_MASKING))
        if with_masking is None or without_masking is None:
            return None
        return cls(facts.get(BillKey.COLD) is True, with_masking, without_masking)


@dataclass
class RequestsBilled:
    """Requests of one kind, and what the ledger estimates they cost."""

    requests: int = 0
    with_masking: float = 0.0
    without_masking: float = 0.0
    tokens_saved: int = 0  # the masked results' tokens, before minus after

    @property
    def saved(self) -> float:
        return self.without_masking - self.with_masking

    def as_json(self) -> dict[str, object]:
        return {"requests": self.requests,
                "estimated_with_masking": round(self.with_masking, 1),
                "estimated_without_masking": round(self.without_masking, 1),
                "estimated_saved": round(self.saved, 1),
                "tokens_saved": self.tokens_saved}


@dataclass
class TurnFigures:
    """The saving on cold turns and on warm ones, added up."""

    cold: RequestsBilled
    warm: RequestsBilled

    @classmethod
    def empty(cls) -> TurnFigures:
        return cls(RequestsBilled(), RequestsBilled())

    def add(self, facts: TurnFacts, tokens_saved: int | None) -> None:
        kind = self.cold if facts.cold else self.warm
        kind.requests += 1
        kind.with_masking += facts.with_masking
        kind.without_masking += facts.without_masking
        kind.tokens_saved += tokens_saved or 0

    @property
    def cold_share(self) -> float | None:
        """The share of the estimated saving made on cold turns."""
        total = self.cold.saved + self.warm.saved
        return self.cold.saved / total if total > 0 else None

    def as_json(self) -> dict[str, object]:
        share = self.cold_share
        return {"cold": self.cold.as_json(), "warm": self.warm.as_json(),
                "cold_share_of_saving": round(share, 4) if share is not None else None}

    def describe(self) -> str:
        cold, warm = self.cold, self.warm
        share = self.cold_share
        return (f"{cold.requests:,} request(s) came back after the cache's lifetime and "
                f"saved {cold.saved:,.0f} estimated tokens; {warm.requests:,} warm one(s) "
                f"saved {warm.saved:,.0f}"
                + (f" ({share:.0%} of the saving on cold turns)" if share is not None else ""))
