"""The provider's brake (``mitm/brake_addon``) in the totals: one flow's
facts (its metadata's ``brake``, read back with a check of every value)
and their sums."""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.shared.read_back import count, mapping
from obsmask_core.shared.request_record import BrakeKey


@dataclass(frozen=True)
class BrakeFacts:
    """The provider's brake at a request whose answer it weighed
    (``mitm/brake_addon``): what the answer's figures cost beyond the
    ledger's prediction, whether the conversation is braked, and whether
    this answer braked it."""

    surprise: float
    braked: bool
    tripped: bool

    @classmethod
    def read(cls, value: object) -> BrakeFacts | None:
        facts = mapping(value)
        surprise = facts.get(BrakeKey.SURPRISE)
        if isinstance(surprise, bool) or not isinstance(surprise, (int, float)):
            return None
        return cls(float(surprise), count(facts.get(BrakeKey.BRAKED_FROM)) is not None,
                   facts.get(BrakeKey.TRIPPED) is True)



@dataclass
class BrakeFigures:
    """The provider's brake added up: answers weighed, the sum of their
    surprises (estimated tokens at the base price beyond the ledger's
    prediction), the answers that braked a conversation, and the answers
    weighed after their conversation was braked."""

    weighed: int = 0
    surprise: float = 0.0
    tripped: int = 0
    braked_requests: int = 0

    def add(self, facts: BrakeFacts) -> None:
        self.weighed += 1
        self.surprise += facts.surprise
        self.tripped += facts.tripped
        self.braked_requests += facts.braked and not facts.tripped

    def as_json(self) -> dict[str, object]:
        return {"answers_weighed": self.weighed, "surprise_tokens": round(self.surprise, 1),
                "conversations_braked": self.tripped, "braked_requests": self.braked_requests}
