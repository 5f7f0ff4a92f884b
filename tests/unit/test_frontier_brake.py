"""The frontier held by the provider's brake (``BillingTerms(braked_from=...)``,
``conversation/frontier/``): from the braked request end on, the replay
moves the frontier no more, the same way on every later request, so what
was masked stays masked and every later request forwards the braked
request's items byte for byte; requests before it are planned as without
the brake; a checkpoint is resumed only by a replay that met the same
brake."""

from __future__ import annotations

import json
from typing import cast

import pytest

from obsmask_core.conversation.billing.breakpoints import CacheLayout, read_layout
from obsmask_core.conversation.billing.last_seen import Recorded
from obsmask_core.conversation.billing.terms import BillingTerms
from obsmask_core.conversation.frontier.frontier import Frontier
from obsmask_core.conversation.masking.apply import apply_plan
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.planning.memory import PlanMemory
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, WireFormat
from obsmask_core.conversation.view.explain import MaskingExplanation, explain_masking
from support.formats import Call, Event, Result, Say, Turn, claude_code_body, convert

BIG, PROMPT, THINKING = "B" * 20_000, "u" * 8000, "t" * 2000
# The shipped mitm.toml.
SHIPPED = {"window_turns": 1, "min_free_percent": 80, "price_model": "anthropic",
           "allowance_percent": 2}


def conversation(outputs: list[str]) -> list[Event]:
    events: list[Event] = [Say("user", PROMPT)]
    for turn, output in enumerate(outputs):
        events += [Turn([Call(f"c{turn}", "bash")], text=THINKING), Result(f"c{turn}", output)]
    return events


def request(events: list[Event], turns: int,
            fmt: WireFormat) -> tuple[list[object], CacheLayout | None]:
    """The items of the request sent after ``turns`` tool turns (an
    Anthropic one as Claude Code sends it), and its breakpoints."""
    items = convert(fmt, events[: 1 + 2 * turns])
    if fmt is not ANTHROPIC:
        return items, None
    body = claude_code_body(items)
    items = cast(list[object], body["messages"])
    return items, read_layout(body, items)


EVENTS = conversation([BIG] * 10)
BRAKED_AFTER = 5  # the provider's figures tripped the brake at the request after 5 turns
FORMATS = pytest.mark.parametrize("fmt", [CHAT, ANTHROPIC], ids=["prefix", "breakpoints"])


def braked_from(fmt: WireFormat) -> int:
    """The end the table gives: one past the request whose answer tripped it."""
    return len(request(EVENTS, BRAKED_AFTER, fmt)[0]) + 1


def plan(events: list[Event], turns: int, fmt: WireFormat, braked: int | None = None,
         memory: PlanMemory | None = None, **policy: object) -> MaskPlan:
    items, layout = request(events, turns, fmt)
    return plan_masking(fmt.index(items), MaskPolicy(**(SHIPPED | policy)), items,
                        terms=BillingTerms(layout=layout, braked_from=braked), memory=memory)


@FORMATS
def test_the_frontier_moves_no_more_from_the_braked_request_end(fmt):
    """Premise: unbraked, the frontier moves after the braked request. With
    the brake, every later request's frontier and masked results are those
    of the request that tripped it, and its bill says where it stopped."""
    stopped = plan(EVENTS, BRAKED_AFTER, fmt)
    assert plan(EVENTS, 10, fmt).frontier_turn > stopped.frontier_turn
    for turns in range(BRAKED_AFTER + 1, 11):
        later = plan(EVENTS, turns, fmt, braked_from(fmt))
        assert later.frontier_turn == stopped.frontier_turn, turns
        assert {d.call_id for d in later.decisions} == {d.call_id for d in stopped.decisions}
        assert later.bill is not None and later.bill.braked_from == braked_from(fmt)
        assert later.bill.as_metadata()["braked_from"] == braked_from(fmt)


@FORMATS
def test_requests_before_the_brake_are_planned_as_without_it(fmt):
    """The request that tripped it and every earlier one: the brake is past
    their ends, so their replay, plan and bill are the unbraked ones."""
    for turns in range(1, BRAKED_AFTER + 1):
        assert plan(EVENTS, turns, fmt, braked_from(fmt)) == plan(EVENTS, turns, fmt), turns


@FORMATS
def test_every_later_request_forwards_the_braked_requests_items_byte_for_byte(fmt):
    """What went out at the request that tripped the brake goes out again
    in every later request: nothing masked is unmasked, nothing more is
    masked (the provider reads it all from its cache)."""
    items, _ = request(EVENTS, BRAKED_AFTER, fmt)
    sent = apply_plan(items, plan(EVENTS, BRAKED_AFTER, fmt), fmt)[:-1]
    for turns in range(BRAKED_AFTER + 1, 11):
        later_items, _ = request(EVENTS, turns, fmt)
        forwarded = apply_plan(later_items, plan(EVENTS, turns, fmt, braked_from(fmt)), fmt)
        assert json.dumps(forwarded[:len(sent)]) == json.dumps(sent), turns


@FORMATS
def test_a_checkpoint_is_resumed_only_by_a_replay_that_met_the_same_brake(fmt):
    """A conversation planned with memory (checkpoints) gives the plans of a
    full replay, whether the brake came before the checkpoint, after it, or
    went (a restart lost it)."""
    for brakes in ([None] * 10, [None] * 6 + [braked_from(fmt)] * 4,
                   [braked_from(fmt)] * 8 + [None] * 2):
        memory = PlanMemory()
        for turns, braked in enumerate(brakes, start=1):
            assert plan(EVENTS, turns, fmt, braked, memory) == plan(EVENTS, turns, fmt, braked)


def test_the_brake_changes_nothing_without_a_price_model_with_a_cache():
    for turns in range(1, 11):
        assert plan(EVENTS, turns, CHAT, braked_from(CHAT), price_model="none") \
            == plan(EVENTS, turns, CHAT, price_model="none")


def test_a_checkpoint_records_the_brake_its_replay_met():
    items, _ = request(EVENTS, 8, CHAT)
    index = CHAT.index(items)
    maskable = {number: "x" for number in range(len(index.results))}
    policy = MaskPolicy(**SHIPPED)
    braked = Frontier(index, items, policy, maskable,
                      terms=BillingTerms(braked_from=braked_from(CHAT)))
    assert braked.checkpoint(b"[]").braked_from == braked_from(CHAT)
    later = Frontier(index, items, policy, maskable, terms=BillingTerms(braked_from=len(items) + 1))
    assert later.checkpoint(b"[]").braked_from is None


def test_the_content_view_plans_a_braked_request_again_from_its_recorded_brake():
    """The view plans the original again with the brake its bill recorded,
    and so finds the body that went out; without it, another one."""

    items = convert(ANTHROPIC, EVENTS[: 1 + 2 * 10])
    original = json.dumps(claude_code_body(items)).encode()
    policy = MaskPolicy(**SHIPPED, provider_brake=True)
    went = mask_request_body(original, policy, ANTHROPIC,
                             visit=Recorded(frozenset(), braked_from(ANTHROPIC)))
    assert isinstance(went, Masked)
    explained = explain_masking(original, went.body, ANTHROPIC, policy,
                                table=Recorded(frozenset(), braked_from(ANTHROPIC)))
    assert isinstance(explained, MaskingExplanation) and explained.reasons_note is None
    unbraked = explain_masking(original, went.body, ANTHROPIC, policy)
    assert not isinstance(unbraked, MaskingExplanation) or unbraked.reasons_note is not None
