"""One conversation replayed request by request, without obsmask and with
the settings in force, by the cache benchmark's replay
(``obsmask_core.offline.cache.replay``): the bill of each under every price model, and
a single request's estimate.

The replay keeps, per price model, the bill so far after every request,
and each request's own figures: its input tokens and the tokens it reads
from the cache under each cache rule.

A conversation in the holdout group (``holdout_percent``) is left unmasked
by the proxy, so its replay with obsmask is too: its two bills are equal,
and ``held_out`` says why (the masking code's own decision).
"""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.conversation.billing.price_models import PriceModel
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.offline.cache.billing import SessionBill
from obsmask_core.offline.cache.block_tokens import MessageTokens
from obsmask_core.offline.cache.replay import PolicyRun, replay
from obsmask_core.offline.cache.sessions import Session
from obsmask_core.offline.cache.so_far import worst_so_far

# Masking off: the bill the conversation has without obsmask.
WITHOUT_OBSMASK = MaskPolicy(enabled=False)


@dataclass(frozen=True)
class RequestEstimate:
    """The replay's figures for one request."""

    input_tokens: int
    cached: dict[str, int]  # cache rule -> tokens read from the cache


def request_estimate(bill: SessionBill, index: int) -> RequestEstimate:
    """Request ``index`` (from 0) of a replayed bill."""
    request = bill.per_request[index]
    return RequestEstimate(request.input_tokens, dict(request.cached))


@dataclass(frozen=True)
class ConversationBill:
    """The replay of one conversation, without and with obsmask."""

    without: PolicyRun
    with_obsmask: PolicyRun
    # In the holdout group: obsmask leaves it unmasked, as the proxy does.
    held_out: bool = False

    @property
    def requests(self) -> int:
        return self.without.bill.requests

    def cost(self, model: PriceModel) -> tuple[float, float]:
        """(without obsmask, with obsmask), in input tokens at the base price."""
        return self.without.bill.cost[model.name], self.with_obsmask.bill.cost[model.name]

    def worst_so_far(self, model: PriceModel) -> tuple[float, int] | None:
        """The highest ratio of the bill so far with obsmask to the one
        without, from the cache benchmark's first judged request on, and the
        request (from 1) where it is reached; None for a short conversation."""
        return worst_so_far(self.with_obsmask.bill.so_far[model.name],
                            self.without.bill.so_far[model.name])


def held_out(session: Session, policy: MaskPolicy) -> bool:
    """Does the proxy leave this conversation unmasked, in the holdout group
    (``holdout_percent``)? The planner's answer for its whole list (every
    request of it holds the first user message that decides)."""
    items = session.messages
    return plan_masking(session.fmt.index(items), policy, items).held_out


def bill_conversation(session: Session, policy: MaskPolicy,
                      tokens: MessageTokens) -> ConversationBill:
    originals = [tokens.segment(message) for message in session.messages]
    return ConversationBill(replay(session, WITHOUT_OBSMASK, tokens, originals),
                            replay(session, policy, tokens, originals),
                            held_out(session, policy))
