"""What a request's outcome leaves in its flow's metadata, as the
conversation addon writes it: a masked request's ``MaskSummary``, the
``LeftAlone`` of one that went out as it came. For the offline tools, which
plan recorded requests again and must count them as the proxy did (the
addon writes the same records, with its log lines and the ``why`` of an
unmasked request beside them)."""

from __future__ import annotations

from obsmask_core.conversation.masking.outcomes import (
    Masked,
    Refused,
    RewriteOutcome,
    Unchanged,
    Unreadable,
)
from obsmask_core.conversation.masking.summary import LeftAlone, MaskSummary
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.shared.tokens import TokenCounter


def outcome_metadata(outcome: RewriteOutcome, fmt: str, tokens: TokenCounter,
                     policy: MaskPolicy, body_bytes: int) -> dict[str, object]:
    """The metadata of a request of ``body_bytes`` bytes whose masking gave
    ``outcome``, with every token counted on the spot (nobody waits)."""
    match outcome:
        case Masked():
            return MaskSummary.of(outcome, fmt, tokens, policy, body_bytes,
                                  len(outcome.body), exact_tokens=True).as_metadata()
        case Unchanged(reason=reason, plan=plan):
            return LeftAlone.unchanged(fmt, reason, plan).as_metadata()
        case Refused(violation=violation):
            return LeftAlone("passed_through", fmt, violation).as_metadata()
        case Unreadable(reason=reason):
            return LeftAlone("passed_through", fmt, reason).as_metadata()
