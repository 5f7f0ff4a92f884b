"""A request's re-fetches as its flow's metadata says them
(``flow.metadata["obsmask"]["refetches"]``): one value object, made by the
conversation's planner (``conversation.refetch.refetch_facts``), written
with ``as_metadata`` and read back with ``read``, with a check of every
value. The totals add them up, the content view and the report show them;
all read them here (the totals may not lean on the conversation's folder).

A flow file may hold anything: a value of the wrong type counts as absent
(0, or left out of a list), and never stops what reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from obsmask_core.shared.read_back import count, mapping
from obsmask_core.shared.request_record import Key

# The key of the dict in the conversation's metadata.
REFETCHES_KEY = Key.REFETCHES
# Where a re-fetch's tool has no name.
UNKNOWN_TOOL = "unknown"


@dataclass(frozen=True)
class RefetchFacts:
    """``new``: the re-fetches in the model's newest answer (summed over a
    conversation's requests, each re-fetch counts once), their call ids and
    their count per tool; the tokens of their results; ``extra_turns`` 1
    when that answer made nothing but re-fetches; the conversation's count
    so far; and the results the guard keeps in this request."""

    new: int = 0
    new_calls: tuple[str, ...] = ()
    new_tools: tuple[tuple[str, int], ...] = ()
    result_tokens: int = 0
    extra_turns: int = 0
    in_conversation: int = 0
    guarded_results: int = 0

    @classmethod
    def read(cls, value: object) -> RefetchFacts | None:
        """The dict's facts; None when there is no dict (the conversation
        has had no re-fetch, and the guard keeps nothing)."""
        if not isinstance(value, Mapping):
            return None
        facts = mapping(value)
        calls = facts.get("new_calls")
        tools = mapping(facts.get("new_tools"))
        extra = count(facts.get("extra_turns"))
        return cls(
            new=count(facts.get("new")) or 0,
            new_calls=tuple(call for call in calls if isinstance(call, str))
            if isinstance(calls, list) else (),
            new_tools=tuple(sorted((tool, number) for tool, value in tools.items()
                                   if isinstance(tool, str)
                                   and (number := count(value)) is not None and number)),
            result_tokens=count(facts.get("result_tokens")) or 0,
            # One answer is one model turn at most.
            extra_turns=extra if extra in (0, 1) else 0,
            in_conversation=count(facts.get("in_conversation")) or 0,
            guarded_results=count(facts.get("guarded_results")) or 0,
        )

    def __bool__(self) -> bool:
        return bool(self.new or self.in_conversation or self.guarded_results)

    def as_metadata(self) -> dict[str, object]:
        return {
            "new": self.new, "new_calls": list(self.new_calls),
            "new_tools": dict(self.new_tools), "result_tokens": self.result_tokens,
            "extra_turns": self.extra_turns, "in_conversation": self.in_conversation,
            "guarded_results": self.guarded_results,
        }
