"""The provider's own figures next to the replay's estimate, request by
request: for each recorded request whose flow carries them, the replayed
request of the same length, without and with obsmask."""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.offline.measure.bill import ConversationBill, RequestEstimate, request_estimate
from obsmask_core.offline.measure.conversations import Conversation
from obsmask_core.offline.measure.inputs import SentRequest
from obsmask_core.offline.measure.usage import ProviderTokens, provider_tokens


@dataclass(frozen=True)
class RequestComparison:
    """A recorded request with the provider's figures, and the replay's
    estimate for the same request without and with obsmask (None when the
    replay has no request of its length)."""

    request: SentRequest
    replayed: int | None  # the replayed request, from 0
    provider: ProviderTokens
    without: RequestEstimate | None
    with_obsmask: RequestEstimate | None


def comparisons(conversation: Conversation, bill: ConversationBill) -> list[RequestComparison]:
    """The recorded requests of ``conversation`` that carry the provider's figures."""
    out = []
    for request in conversation.requests:
        tokens = (provider_tokens(request.usage, request.body[2])
                  if request.usage is not None else None)
        if tokens is None:
            continue
        index = conversation.replay_index(request)
        out.append(RequestComparison(
            request, index, tokens,
            request_estimate(bill.without.bill, index) if index is not None else None,
            request_estimate(bill.with_obsmask.bill, index) if index is not None else None))
    return out
