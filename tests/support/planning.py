"""A conversation written with the events of ``support.formats``, planned and
masked by the code under test: its plan, and the ids of the results that
masking changed."""

from __future__ import annotations

from typing import cast

from obsmask_core.conversation.billing.breakpoints import CacheLayout, read_layout
from obsmask_core.conversation.billing.terms import BillingTerms
from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, WireFormat
from support.formats import Event, changed_results, claude_code_body, convert

# A structured block that the default preserve_patterns keeps when the
# result around it is masked.
DISPATCH = 'BEGIN_DISPATCH_RESULT\n{"status": "done", "files": 3}\nEND_DISPATCH_RESULT'


# The longest-common-prefix reading of a prompt cache: what the ledger bills
# an Anthropic client under when its breakpoints stay put among the
# messages. A move re-bills exactly what follows its first change, so the
# frontier's rules can be told on it with figures a reader can follow.
PREFIX_CACHE = CacheLayout(outside_messages=0, in_messages=1, marks_end=False,
                           control={"type": "ephemeral"}, preamble_tokens=0)


def plan_of(events: list[Event], fmt: WireFormat = CHAT, layout: CacheLayout | None = None,
            **policy: object) -> MaskPlan:
    items = convert(fmt, events)
    return plan_masking(fmt.index(items), MaskPolicy(**policy), items,
                        terms=BillingTerms(layout=layout))


def plan_as_sent(events: list[Event], **policy: object) -> MaskPlan:
    """The plan of an Anthropic request as Claude Code sends it (its
    breakpoints: ``claude_code_body``), which the ledger bills under
    Anthropic's cache."""
    body = claude_code_body(convert(ANTHROPIC, events))
    items = cast(list[object], body["messages"])
    return plan_masking(ANTHROPIC.index(items), MaskPolicy(**policy), items,
                        terms=BillingTerms(layout=read_layout(body, items)))


def masked_ids(events: list[Event], fmt: WireFormat = CHAT, **policy: object) -> list[object]:
    before = convert(fmt, events)
    return changed_results(fmt, before, mask_items(before, MaskPolicy(**policy), fmt))
