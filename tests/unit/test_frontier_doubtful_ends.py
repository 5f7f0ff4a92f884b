"""A request that came after a pause the provider's cache may or may not
have outlived (a doubtful end, ``conversation/billing/last_seen.py``): if
the cache did expire, only the entries that request wrote again live on,
so from there on the ledger counts on no other; a replay that resumes
from before it knew of the pause replays it anew."""

from __future__ import annotations

from typing import cast

from obsmask_core.conversation.billing.breakpoints import CacheLayout, read_layout
from obsmask_core.conversation.billing.terms import BillingTerms
from obsmask_core.conversation.planning.memory import PlanMemory
from obsmask_core.conversation.planning.plan import MASKED, MaskPlan
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from support.conversation_strategies import requests_of
from support.formats import Call, Event, Result, Say, Turn, claude_code_body, convert
from support.resumed_replays import same_plan

LONG = "\n".join(f"line {n}: some ordinary tool output" for n in range(60))
POLICY = MaskPolicy(window_turns=1, keep_errors=False, price_model="anthropic",
                    allowance_percent=1, frontier_breakpoint=False, cold_turns=False,
                    provider_brake=False, refetch_guard=False)


def turn(number: int, output: str) -> list[Event]:
    return [Turn([Call(f"c{number}", "bash", {"c": 1})], text="t"), Result(f"c{number}", output)]


def conversation() -> list[Event]:
    """Five short results, four long ones, a reply and a new instruction,
    then three short results: the last request's move masks a long result
    by reading an entry written before the request at 17 items."""
    events: list[Event] = [Say("user", "go")]
    for number in range(5):
        events += turn(number, "ok")
    for number in range(5, 9):
        events += turn(number, LONG)
    events += [Say("assistant", "Here is what I found. "), Say("user", "go on")]
    for number in range(9, 12):
        events += turn(number, "ok")
    return events


def last_request(events: list[Event]) -> tuple[list[object], CacheLayout | None]:
    """The conversation's last request as Claude Code sends it, and its
    breakpoints."""
    body = claude_code_body(convert(ANTHROPIC, requests_of(events)[-1]))
    items = cast(list[object], body["messages"])
    return items, read_layout(body, items)


def last_plan(doubtful_ends: frozenset[int], memory: PlanMemory | None = None) -> MaskPlan:
    items, layout = last_request(conversation())
    return plan_masking(ANTHROPIC.index(items), POLICY, items, memory=memory,
                        terms=BillingTerms(layout=layout, doubtful_ends=doubtful_ends))


def masked(plan: MaskPlan) -> list[str]:
    return [decision.call_id for decision in plan.decisions if decision.kind == MASKED]


def test_after_a_doubtful_pause_a_move_counts_on_no_entry_written_before_it():
    """Warm, the last request masks a long result and reads the entry an
    earlier request wrote before it; after a doubtful pause at 17 items
    that entry may be gone, the move would re-bill everything after the
    system, and the ledger keeps the result."""
    warm, doubtful = last_plan(frozenset()), last_plan(frozenset({17}))
    assert masked(warm) and not masked(doubtful)
    assert warm.bill is not None and doubtful.bill is not None
    assert doubtful.bill.doubtful_ends == (17,) and warm.bill.doubtful_ends == ()
    assert doubtful.bill.as_metadata()["doubtful_ends"] == [17]


def test_a_replay_resumed_from_before_it_knew_of_a_doubtful_pause_plans_as_a_full_one():
    """The table learnt of the pause after the request was first planned
    (another proxy's sighting): the kept replay does not go through the
    states of one that knew, so the request is replayed anew."""
    memory = PlanMemory()
    last_plan(frozenset(), memory)
    same_plan(last_plan(frozenset({17}), memory), last_plan(frozenset({17})))
