"""The second stage of a plan: while a request is still estimated over
``max_input_tokens``, results inside the window are clipped to head +
marker + tail, oldest first."""

from __future__ import annotations

from collections.abc import Sequence

from obsmask_core.conversation.frontier.frontier import Frontier, estimate_tokens
from obsmask_core.conversation.planning.plan import CLIPPED, MaskDecision, MaskPlan
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.turn_model import Location, ToolTurnIndex
from obsmask_core.shared.truncation import truncate_text


def clip(
    plan: MaskPlan,
    index: ToolTurnIndex,
    items: Sequence[object],
    policy: MaskPolicy,
    frontier: Frontier,
    recallable: frozenset[str],
    recalled: frozenset[Location],
) -> None:
    """The second stage: while the request is still estimated over
    ``max_input_tokens``, clip results inside the window to head + marker +
    tail, oldest first. No message is ever removed. With ``recall``, the
    marker names the call's id: the whole result comes back from the
    request like a masked one."""
    chars = frontier.chars_before[-1] - sum(
        len(d.original) - len(d.new_text) for d in plan.decisions
    )
    if estimate_tokens(chars, len(items)) <= policy.max_input_tokens:
        return
    masked = {d.location for d in plan.decisions}
    for result in index.results:
        if estimate_tokens(chars, len(items)) <= policy.max_input_tokens:
            break
        text = result.text
        if (
            text is None
            or result.location in masked
            or result.location in recalled
            or result.turn < frontier.turn
            or (result.tool_name is not None and result.tool_name in policy.exclude_tools)
        ):
            continue
        clipped = truncate_text(text, policy.clip_head_chars, policy.clip_tail_chars,
                                recall_id=result.call_id if result.call_id in recallable
                                else None)
        if clipped == text:
            continue
        plan.decisions.append(
            MaskDecision(
                location=result.location,
                call_id=result.call_id,
                tool_name=result.tool_name,
                original=text,
                original_value=result.content,
                new_text=clipped,
                kind=CLIPPED,
            )
        )
        chars -= len(text) - len(clipped)
        plan.stage = "clipping"
