"""What the rewrite of a request body can come to: masked, unchanged,
unreadable, or refused by its own check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from obsmask_core.conversation.planning.plan import MaskPlan


@dataclass(frozen=True)
class Masked:
    """The new body, and what was done (``tool_chars_*``: characters of the
    tool results' text before and after)."""

    body: bytes
    plan: MaskPlan
    tool_chars_before: int
    tool_chars_after: int
    # Made from the previous request's masked body (``previous_requests``).
    reused: bool = False
    reason: ClassVar[str] = "masked"


@dataclass(frozen=True)
class Unchanged:
    """A request read as it should be, with nothing to change (or masking is
    off): the original goes out."""

    reason: str
    plan: MaskPlan | None = None
    body: ClassVar[None] = None


@dataclass(frozen=True)
class Unreadable:
    """A body that is not a request of the format (not JSON, no list...):
    the original goes out, and the reason is worth a warning."""

    reason: str
    body: ClassVar[None] = None
    plan: ClassVar[None] = None


@dataclass(frozen=True)
class Refused:
    """The masked body broke a rule of masking (a bug of ours): the original
    goes out, and ``violation`` is worth an error in the log."""

    violation: str
    plan: MaskPlan
    body: ClassVar[None] = None
    reason: ClassVar[str] = "masked body failed its check"


RewriteOutcome = Masked | Unchanged | Unreadable | Refused
