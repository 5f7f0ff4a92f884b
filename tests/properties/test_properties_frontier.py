"""Property-based test of the frontier: a conversation grown one request at a
time is masked monotonically (a result masked once stays masked, with the
same bytes), and the masked prefix up to the frontier does not change while
the frontier stays put, whatever the cache-aware and budget settings."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings

from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.planning.plan import MASKED
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES
from support.conversation_strategies import growing_conversations, policies, requests_of
from support.formats import convert, result_values, skeleton


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=growing_conversations(), policy=policies)
def test_growing_conversation_is_masked_monotonically(events, policy):
    """For a conversation grown one request at a time, masking is monotone, the
    serialised masked prefix up to the frontier is unchanged whenever the
    frontier did not move, and the invariants of masking (same items, same
    ids and calls, only results' values change) hold with every setting."""
    for fmt in (CHAT, ANTHROPIC, RESPONSES):
        previous = None
        for request in requests_of(events):
            items = convert(fmt, request)
            plan = plan_masking(fmt.index(items), policy, items)
            after = mask_items(items, policy, fmt)
            assert len(after) == len(items) and skeleton(fmt, after) == skeleton(fmt, items)
            values = dict(result_values(fmt, after))
            masked_now = {d.call_id: values[d.call_id] for d in plan.decisions
                          if d.kind == MASKED}
            if previous is not None:
                old_masked, old_frontier, old_after, old_index = previous
                # Monotone: masked once, masked again, with the same bytes.
                for call_id, value in old_masked.items():
                    assert masked_now.get(call_id) == value
                assert plan.frontier_turn >= old_frontier
                if plan.frontier_turn == old_frontier:
                    turns = old_index.turns
                    end = (turns[old_frontier].location[0] if old_frontier < len(turns)
                           else len(old_after))
                    assert json.dumps(after[:end]) == json.dumps(old_after[:end])
            previous = (masked_now, plan.frontier_turn, after, fmt.index(items))
