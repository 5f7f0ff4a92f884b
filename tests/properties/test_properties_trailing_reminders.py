"""Claude Code (2.1.330, with the 5.x models) ends every request with a
``role: "system"`` reminder: the tokens left, its guidance for the turn and
its moving breakpoint. The next request keeps the reminder where it was but
rewrites it, down to the tokens left. The frontier judges each request's
moves without the system messages it ends with, so every later request,
which holds the reminder rewritten, judges them alike: a result masked in
one request stays masked in every later one."""

from __future__ import annotations

from typing import cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.billing.breakpoints import read_layout
from obsmask_core.conversation.billing.terms import BillingTerms
from obsmask_core.conversation.planning.plan import MASKED
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from support.conversation_strategies import growing_conversations, requests_of
from support.formats import Event, Say, claude_code_body, convert

MARK = {"type": "ephemeral"}


def latest_reminder(tokens_left: int, guidance: str) -> dict[str, object]:
    """The reminder as the request it ends sends it: two blocks, the first
    carrying Claude Code's moving breakpoint."""
    blocks: list[object] = [
        {"type": "text", "text": f"<total_tokens>{tokens_left} tokens left</total_tokens>",
         "cache_control": MARK}]
    if guidance:
        blocks.append({"type": "text", "text": guidance})
    return {"role": "system", "content": blocks}


def rewritten_reminder(tokens_left: int) -> dict[str, object]:
    """The same reminder as every later request holds it."""
    return {"role": "system", "content": f"<total_tokens>{tokens_left} tokens left</total_tokens>"}


def with_reminders(requests: list[list[Event]], guidance: str) -> list[list[object]]:
    """Each request's messages: a rewritten reminder after each earlier
    request's end, the latest reminder at its own."""
    out: list[list[object]] = []
    for number, request in enumerate(requests):
        items: list[object] = []
        done = 0
        for earlier in range(number):
            end = len(requests[earlier])
            items += convert(ANTHROPIC, request[:end])[len(convert(ANTHROPIC, request[:done])):]
            items.append(rewritten_reminder(1_000_000 - earlier))
            done = end
        items += convert(ANTHROPIC, request)[len(convert(ANTHROPIC, request[:done])):]
        items.append(latest_reminder(1_000_000 - number, guidance))
        out.append(items)
    return out


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events=growing_conversations(),
       prompt=st.sampled_from(["go", "Fix it. " * 300, "Context: " * 1000]),
       guidance=st.sampled_from(["", "List what you need first. " * 4,
                                 "Plan before you call a tool. " * 200]),
       allowance=st.integers(0, 5), factor=st.sampled_from([0, 8]))
def test_a_result_masked_under_a_fresh_reminder_stays_masked_once_it_is_rewritten(
        events, prompt, guidance, allowance, factor):
    policy = MaskPolicy(window_turns=1, price_model="anthropic", allowance_percent=allowance,
                        frontier_breakpoint=True, payback_factor=factor)
    conversation = [Say("user", prompt), *events[1:]]
    masked_before: set[str] = set()
    for items in with_reminders(requests_of(conversation), guidance):
        body = {**claude_code_body([]), "messages": items}
        messages = cast(list[object], body["messages"])
        plan = plan_masking(ANTHROPIC.index(messages), policy, messages,
                            terms=BillingTerms(layout=read_layout(body, messages)))
        masked = {decision.call_id for decision in plan.decisions if decision.kind == MASKED}
        assert masked_before <= masked, sorted(masked_before - masked)
        masked_before = masked
