"""What obsmask decides for each request under the replayed policy: where
its frontier stands, which stage it is in, how many results it masks and
clips; and whether the request it makes is exactly the one that was sent.

The plan is the masking code's own (``plan_masking``, then ``apply_plan``:
what ``mask_items``, and so the cache benchmark's replay, do in one call). For flows
recorded without obsmask it shows what obsmask would have done; for flows
masked by obsmask the check "as sent" says whether the bill "with masking"
is the bill of what really went out.
"""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.conversation.masking.apply import apply_plan
from obsmask_core.conversation.planning.memory import PlanMemory
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.offline.cache.block_tokens import MessageTokens
from obsmask_core.offline.report.conversations import ParsedBody
from obsmask_core.offline.report.estimates import prompt_tokens


@dataclass(frozen=True)
class ReplayedPlan:
    frontier_turn: int  # tool turns before this one are past the frontier
    tool_turns: int
    stage: str
    masked: int
    clipped: int
    input_tokens: int  # of the replayed request (obsmask_core.offline.report.estimates)
    # The replayed request equals the one sent; None when the sent body
    # cannot be read.
    as_sent: bool | None
    # The conversation is in the holdout group (holdout_percent): the
    # policy leaves it unmasked, as the proxy does.
    held_out: bool = False


def replay_plan(original: ParsedBody, sent: ParsedBody | None, fmt: WireFormat,
                policy: MaskPolicy, tokens: MessageTokens,
                memory: PlanMemory | None = None) -> ReplayedPlan:
    """The request planned anew under ``policy``; ``memory``: the plan's
    judgements and checkpoints, kept over the conversation's requests (the
    plan is the same without, made later)."""
    plan = plan_masking(fmt.index(original.items), policy, original.items, memory=memory)
    replayed = ParsedBody(apply_plan(original.items, plan, fmt), original.preamble,
                          original.members)
    as_sent = None if sent is None else replayed == sent
    return ReplayedPlan(plan.frontier_turn, plan.tool_turns, plan.stage, plan.masked,
                        plan.clipped, prompt_tokens(replayed, fmt, tokens), as_sent,
                        plan.held_out)
