"""The provider's word as a brake (``conversation/billing/brake.py``): each
answer's reported cache figures are weighed against the ledger's prediction
for its request, the conversation's surprise is added up in the table of
when conversations were last seen, and once the bill so far, as the
provider reported it, goes past the allowance, the conversation's frontier
stops from its next request on (planning reads ``braked_from`` from the
same table). Said in one log line, the flow's comment and its metadata
(``brake``), which the totals and the metrics read.

Runs after the conversation addon, whose ``response`` records a buffered
answer's usage, before any of it goes on to the client. A streamed answer's
usage is recorded as it passes, and weighed there too, before the chunk
that completes the report goes on: the client, which sends the
conversation's next request once it has the whole answer, never gets it
planned before the answer was weighed. An answer cut after its usage
report (``error``) counts too, once. An answer whose figures cannot be
read changes nothing, and nothing escapes into mitmproxy.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from mitmproxy import http

from obsmask_core.conversation.billing.brake import reading
from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.flows import CONVERSATION_METADATA, add_comment, guarded, where
from obsmask_core.shared.request_record import BillKey, BrakeKey, Key

logger = logging.getLogger(__name__)
BRAKE_METADATA = Key.BRAKE


class ProviderBrake:
    """Reads each conversation answer's figures against its bill (the
    conversation addon's policy and tables)."""

    def __init__(self, masking: ConversationMasking) -> None:
        self.masking = masking
        masking.usage_read.append(self._streamed)

    def _streamed(self, flow: http.HTTPFlow) -> None:
        with guarded(flow, "streamed on, its cache figures not weighed"):
            self._weigh(flow)

    def response(self, flow: http.HTTPFlow) -> None:
        with guarded(flow, "answered unchanged, its cache figures not weighed"):
            self._weigh(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        with guarded(flow, "ended, its cache figures not weighed"):
            self._weigh(flow)

    def _weigh(self, flow: http.HTTPFlow) -> None:
        if not self.masking.policy.provider_brake:
            return
        summary = flow.metadata.get(CONVERSATION_METADATA)
        if not isinstance(summary, dict) or BRAKE_METADATA in summary:
            return
        bill, usage = summary.get(Key.BILL), summary.get(Key.PROVIDER_USAGE)
        if not isinstance(bill, Mapping) or not isinstance(usage, Mapping):
            return
        # The request's key in the table (its history), where the next
        # request of the conversation finds the brake.
        history, conversation = bill.get(BillKey.HISTORY), summary.get(Key.CONVERSATION)
        if not isinstance(history, str):
            return
        read = reading(bill, usage, anthropic=summary.get(Key.FORMAT) == "anthropic")
        if read is None:
            return
        # The table the request was planned with, at the answer's time.
        visit = self.masking.visit(flow)
        braking = visit.table.add_surprise(history, visit.now, read.surprise, read.room,
                                           read.request_items)
        facts: dict[str, object] = {
            BrakeKey.SURPRISE: round(read.surprise, 1),
            BrakeKey.CONVERSATION_SURPRISE: round(braking.surprise, 1),
            BrakeKey.ROOM: round(read.room, 1),
        }
        if braking.braked_from is not None:
            facts[BrakeKey.BRAKED_FROM] = braking.braked_from
        if braking.tripped:
            facts[BrakeKey.TRIPPED] = True
        summary[BRAKE_METADATA] = facts
        if braking.tripped:
            line = (f"obsmask: provider brake: conversation {conversation or history} billed "
                    f"{braking.surprise:.1f} tokens beyond the ledger's prediction, past the "
                    f"{read.room:.1f} its allowance left: its frontier stays where it is from "
                    f"request end {braking.braked_from}")
            add_comment(flow, line)
            logger.warning("%s (%s)", line, where(flow))
