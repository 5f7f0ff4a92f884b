"""Property-based tests of the ledger (``conversation/billing/ledger.py``) as the
frontier uses it: a conversation grown one request at a time, with any
policy, under every price model.

(a) the ledger's promise: at every request, the bill so far with masking is
    within allowance_percent of the bill without (as the ledger counts);
(b) masking is monotone and byte-stable, and a turn the frontier passed
    (masked, or kept for good: "cache") never changes state;
(c) the rules of masking hold (same items, ids, calls; only results' text);
(d) the same promise re-billed here, apart from the code: the requests as
    they were really forwarded, estimated with the same ``prefix_tokens``
    and billed with the same price model, each sharing with the previous
    one its longest common prefix of whole items.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.billing.breakpoints import CacheLayout, read_layout
from obsmask_core.conversation.billing.price_models import PRICE_MODELS, PRICE_UNIT
from obsmask_core.conversation.billing.terms import BillingTerms
from obsmask_core.conversation.frontier.frontier import Frontier
from obsmask_core.conversation.masking.apply import apply_plan
from obsmask_core.conversation.masking.invariants import check_only_planned_changes
from obsmask_core.conversation.masking.outcomes import Masked, Refused, Unreadable
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.planning import planner
from obsmask_core.conversation.planning.plan import MASKED, MaskPlan
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, WireFormat
from support.billing import rebill, so_far
from support.chat import LONG_OUTPUT
from support.conversation_strategies import growing_conversations, policies, requests_of
from support.formats import (
    FORMATS,
    Call,
    Event,
    Result,
    Say,
    Turn,
    claude_code_body,
    convert,
    result_values,
    session,
    skeleton,
    text_of,
)

PRICE_MODEL_NAMES = sorted(PRICE_MODELS)
# A float bill is an integer count of thousandths divided by 1000: comparing
# two of them needs no more than this.
FLOAT_EPSILON = 1e-6
# The shipped mitm.toml.
SHIPPED = {"window_turns": 1, "min_free_percent": 80, "price_model": "anthropic",
           "allowance_percent": 2}


def tool_conversation(results: list[tuple[str, str]]) -> list[Event]:
    """A long prompt, then one tool turn per (tool, output)."""
    events: list[Event] = [Say("user", "u" * 8000)]
    for turn, (tool, output) in enumerate(results):
        events += [Turn([Call(f"c{turn}", tool)], text="t" * 200), Result(f"c{turn}", output)]
    return events


# The last "read" result is kept (keep_last_k_per_tool) until a newer one
# passes the frontier, then masked: far behind the frontier.
PER_TOOL_CONVERSATION = tool_conversation(
    [("read", "B" * 20_000)] + [("bash", "B" * 20_000)] * 3 + [("read", "m" * 3000)]
    + [("bash", "m" * 3000)] * 2)



def outputs_conversation(outputs: list[str], prompt: str, text: str) -> list[Event]:
    """The prompt, then one "bash" tool turn per output."""
    events: list[Event] = [Say("user", prompt)]
    for turn, output in enumerate(outputs):
        events += [Turn([Call(f"c{turn}")], text=text), Result(f"c{turn}", output)]
    return events


SMALL_RESULTS_CONVERSATION = outputs_conversation(["r" * 600] * 8, "p" * 1500, "t")
STEPS_CONVERSATION = outputs_conversation(
    ["s" * 300] * 4 + ["B" * 20_000] + ["s" * 300] * 2, "u" * 8000, "t" * 2000)

# Two results in one Anthropic user message: c1_1, the last "bash" result
# when turn 1 passes the frontier, is kept (keep_last_k_per_tool), then
# masked next to c1_0, masked a request before.
SIBLINGS_CONVERSATION: list[Event] = [
    Say("user", "go"), Turn([Call("c0_0")], text="t"), Result("c0_0", LONG_OUTPUT),
    Turn([Call("c1_0"), Call("c1_1")], text="t"), Result("c1_0", LONG_OUTPUT),
    Result("c1_1", LONG_OUTPUT), Turn([Call("c2_0", "read")], text="t"), Result("c2_0", "ok"),
    Turn([Call("c3_0")], text="t"), Result("c3_0", "ok"),
]

priced_policies = st.builds(
    lambda base, **keys: dataclasses.replace(base, **keys),
    policies,  # every other key, as the frontier's property test draws them
    price_model=st.sampled_from(PRICE_MODEL_NAMES),
    allowance_percent=st.integers(0, 5),
    window_turns=st.integers(1, 4),
    min_free_percent=st.integers(0, 100),
    payback_factor=st.sampled_from([0, 1, 8, 100]),
    batch_turns=st.integers(1, 3),
    # One conversation in ten held out, whole: it must keep every rule too.
    holdout_percent=st.integers(0, 9).map(lambda n: 100 if n == 9 else 0),
)


# The price models whose cache serves the whole shared prefix: the ledger's
# promise holds exactly there. OpenAI's rounds it down to 128-token steps, a
# known gap (test_the_ledger_keeps_the_bill_within_the_allowance_under_openai_steps).
unrounded_priced_policies = priced_policies.filter(
    lambda policy: PRICE_MODELS[policy.price_model].cache_step == 1)


@st.composite
def priced_conversations(draw: st.DrawFn) -> list[Event]:
    """The frontier's growing conversations, with a first message that keeps
    the first requests under the 1024 tokens a provider caches from ("go",
    ~600 tokens) or puts them all over it (~2250): the conversation crosses
    that threshold, or is cached from its first request."""
    events = draw(growing_conversations())
    prompt = draw(st.sampled_from(["go", "Fix it. " * 300, "Context: " * 1000]))
    return [Say("user", prompt), *events[1:]]


@dataclass
class Request:
    """One request of the conversation, as sent and as forwarded, with what
    the frontier decided about each tool turn."""

    sent: list[object]
    forwarded: list[object]
    plan: MaskPlan
    # Per tool turn: "masked", "cache" (passed, kept for good) or None.
    turn_states: list[str | None]


def plan_and_frontier(items: list[object], policy: MaskPolicy, fmt: WireFormat,
                      layout: CacheLayout | None = None) -> tuple[MaskPlan, Frontier | None]:
    """The plan of the code under test, and the frontier it used (caught on
    its way in), to read what it decided about each turn."""
    frontiers: list[Frontier] = []

    def spy(*args: object, **kwargs: object) -> Frontier:
        frontier = Frontier(*args, **kwargs)  # type: ignore[arg-type]
        frontiers.append(frontier)
        return frontier

    with mock.patch.object(planner, "Frontier", spy):
        plan = plan_masking(fmt.index(items), policy, items, terms=BillingTerms(layout=layout))
    return plan, (frontiers[0] if frontiers else None)


def body_of(fmt: WireFormat, items: list[object]) -> dict[str, object]:
    """The whole request body: an Anthropic one as Claude Code sends it."""
    if fmt is ANTHROPIC:
        return claude_code_body(items)
    return {"model": "m", fmt.list_member: items}


def replay(events: list[Event], policy: MaskPolicy, fmt: WireFormat,
           as_sent: bool = False) -> Iterator[Request]:
    """Every request of the conversation, planned by the code under test;
    with ``as_sent``, each as the whole body goes out (``body_of``: an
    Anthropic one with Claude Code's breakpoints, which the plan reads)."""
    for request in requests_of(events):
        items = convert(fmt, request)
        layout = None
        if as_sent:
            body = body_of(fmt, items)
            items = cast(list[object], body[fmt.list_member])
            layout = read_layout(body, items) if fmt is ANTHROPIC else None
        plan, frontier = plan_and_frontier(items, policy, fmt, layout)
        states: list[str | None] = [None] * plan.tool_turns
        if frontier is not None:
            states = [
                ("masked" if frontier.masks(turn) else "cache") if turn < frontier.turn else None
                for turn in range(plan.tool_turns)
            ]
        yield Request(items, apply_plan(items, plan, fmt), plan, states)


fast = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
formats = st.sampled_from(FORMATS)


# (a) ---------------------------------------------------------------------------------


@fast
@example(events=session(turns=5), policy=MaskPolicy(**SHIPPED), fmt=CHAT)
# Masked while under the 1024-token minimum, still under it when the
# original is cached (test_frontier_ledger.py: 1.305x after 5 turns).
@example(events=SMALL_RESULTS_CONVERSATION, policy=MaskPolicy(**SHIPPED), fmt=CHAT)
@given(events=priced_conversations(), policy=unrounded_priced_policies, fmt=formats)
def test_the_ledger_keeps_the_bill_so_far_within_the_allowance_at_every_request(
        events, policy, fmt):
    """The ledger's own figures: the bill so far with masking, this request
    included, is never above (1 + allowance_percent / 100) times the bill
    without; there is no bill without a cache."""
    assert_within_the_allowance(events, policy, fmt)


def test_the_ledger_keeps_the_bill_within_the_allowance_under_openai_steps():
    """The same rule on the case OpenAI's 128-token steps once broke
    (test_frontier_ledger.py): a move now frees enough to pay for a step."""
    assert_within_the_allowance(
        STEPS_CONVERSATION,
        MaskPolicy(window_turns=1, price_model="openai", allowance_percent=0), CHAT)


def assert_within_the_allowance(events, policy, fmt):
    for request in replay(events, policy, fmt):
        bill = request.plan.bill
        if policy.price_model == "none":
            assert bill is None
            continue
        assert bill is not None and bill.price_model == policy.price_model
        limit = bill.without_masking * (1 + policy.allowance_percent / 100)
        assert bill.with_masking <= limit + FLOAT_EPSILON * max(1.0, limit), bill


# (b) ---------------------------------------------------------------------------------


@pytest.mark.xfail(strict=True, reason=(
    "Known gap: with keep_last_k_per_tool on, a result kept for its tool can be "
    "masked later and one masked can come back (the per-tool count follows the "
    "frontier's last move)"))
@fast
@example(events=SIBLINGS_CONVERSATION, fmt=ANTHROPIC,
         policy=MaskPolicy(window_turns=1, keep_last_k_per_tool=1, price_model="none"))
@given(events=priced_conversations(), policy=priced_policies, fmt=formats)
def test_a_passed_turn_never_changes_state_and_masked_bytes_never_change(events, policy, fmt):
    """A result masked in one request is masked in every later one, and the
    item that holds it goes out with the same bytes; a turn the frontier
    passed (masked, or kept for the cache) stays so, and a result kept for
    the cache goes out as the client sent it."""
    previous: Request | None = None
    for request in replay(events, policy, fmt):
        values = dict(result_values(fmt, request.forwarded))
        masked_now = {d.call_id for d in request.plan.decisions if d.kind == MASKED}
        if previous is not None:
            for decision in previous.plan.decisions:
                if decision.kind != MASKED:
                    continue
                assert decision.call_id in masked_now
                position = decision.location[0]
                assert json.dumps(request.forwarded[position]) == json.dumps(
                    previous.forwarded[position]), f"the item holding {decision.call_id}"
            for turn, state in enumerate(previous.turn_states):
                if state is not None:
                    assert request.turn_states[turn] == state, f"turn {turn}"
            assert request.plan.frontier_turn >= previous.plan.frontier_turn
        originals = dict(result_values(fmt, request.sent))
        for result in fmt.index(request.sent).results:
            if request.turn_states[result.turn] == "cache":
                assert result.call_id not in masked_now
                assert json.dumps(values[result.call_id]) == json.dumps(
                    originals[result.call_id])
        previous = request


# (c) ---------------------------------------------------------------------------------


@fast
@given(events=priced_conversations(), policy=priced_policies, fmt=formats)
def test_the_rules_of_masking_hold_with_a_price_model(events, policy, fmt):
    last: Request | None = None
    for request in replay(events, policy, fmt, as_sent=True):
        before, after, plan = request.sent, request.forwarded, request.plan
        assert len(after) == len(before)
        # Same items, ids, calls and fields: only the results' values differ.
        assert skeleton(fmt, after) == skeleton(fmt, before)
        assert check_only_planned_changes(before, after, plan, fmt) == []
        # And each changed value is the text the plan chose for that result.
        planned = {d.call_id: d.new_text for d in plan.decisions}
        for (call_id, old), (_, new) in zip(result_values(fmt, before),
                                            result_values(fmt, after), strict=True):
            if old != new:
                assert isinstance(call_id, str) and text_of(new) == planned[call_id]
        if plan.held_out:
            assert plan.decisions == [] and after == before
        last = request
    # The whole body of the last request, rewritten byte by byte.
    assert last is not None
    body = json.dumps(body_of(fmt, last.sent)).encode()
    outcome = mask_request_body(body, policy, fmt)
    assert not isinstance(outcome, Refused | Unreadable)
    if isinstance(outcome, Masked):
        assert json.loads(outcome.body)[fmt.list_member] == last.forwarded


# (d) ---------------------------------------------------------------------------------


@pytest.mark.xfail(strict=True, reason=(
    "Known gap: the ledger counts the results keep_last_k_per_tool keeps as masked, "
    "so with that rule on its bill is optimistic"))
@fast
@example(events=session(turns=5), policy=MaskPolicy(**SHIPPED), fmt=CHAT)
@example(events=PER_TOOL_CONVERSATION, policy=MaskPolicy(keep_last_k_per_tool=1, **SHIPPED),
         fmt=CHAT)
@given(events=priced_conversations(), policy=priced_policies, fmt=formats)
def test_the_forwarded_requests_rebilled_apart_stay_within_the_allowance(events, policy, fmt):
    """Re-billed here (``support.billing``), the bill so far of the requests
    as obsmask forwarded them stays within the allowance of the bill of the
    requests as sent, at every request.

    The rule, and its tolerance. The ledger counts a placeholder at 1.6x its
    length and only 90% of what masking frees, so a forwarded request is
    really no longer than the ledger thinks (T' <= T), nor is the prefix it
    shares with the previous one (P' <= P: the first newly masked result at
    a move, the whole previous request between moves), and it is shorter by
    at least as much as its prefix is (T - T' >= P - P'). With a cache read
    cheaper than an uncached token, the real cost
    read * P' + uncached * (T' - P') is then at most the ledger's, except for:
    - the floor of characters / 4, which can round the part after the
      prefix one token the other way: one uncached token a request;
    - a cache that serves the prefix in steps (OpenAI: 128 tokens), where P'
      may end one step lower than P: (step - 1) x (uncached - read) a request.
    So, after n requests, with tolerance = n x (those two):
    re-billed as sent == the ledger's bill without masking (same estimate);
    re-billed as forwarded <= the ledger's bill with masking + tolerance;
    re-billed as forwarded <= (1 + allowance) x re-billed as sent + tolerance.
    Nothing is tolerated for the 1024-token minimum: a forwarded request
    that misses it while the request as sent does not is billed in full, a
    cost no rounding explains."""
    requests = list(replay(events, policy, fmt))
    sent = so_far(rebill([r.sent for r in requests], policy.price_model))
    forwarded = so_far(rebill([r.forwarded for r in requests], policy.price_model))
    model = PRICE_MODELS[policy.price_model]
    tolerance = model.uncached + (model.cache_step - 1) * (model.uncached - model.read)
    for n, (request, plain, masked) in enumerate(zip(requests, sent, forwarded, strict=True), 1):
        bill = request.plan.bill
        if bill is not None:
            assert bill.requests == n
            assert abs(plain / PRICE_UNIT - bill.without_masking) <= FLOAT_EPSILON * plain
        else:
            assert policy.price_model == "none"  # no cache: masking only ever saves
        assert masked <= plain * (1 + policy.allowance_percent / 100) + n * tolerance, (
            f"request {n}: forwarded re-billed {masked / PRICE_UNIT}, sent {plain / PRICE_UNIT}")
        if bill is not None:
            assert masked <= bill.with_masking * PRICE_UNIT + n * tolerance, (
                f"request {n}: forwarded re-billed {masked / PRICE_UNIT}, ledger {bill}")
