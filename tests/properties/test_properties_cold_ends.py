"""Property-based tests of the frontier with cold ends (``last_seen``): a
conversation grown one request at a time, some of its requests coming back
after the cache's lifetime, each request planned with the cold ends the
table would give it (those of the requests it holds).

(a) the ledger's promise holds at every request, as it counts;
(b) re-billed apart (``support.billing``: the longest common prefix of whole
    items, nothing shared across a cold request), the requests as forwarded
    stay within the allowance of the requests as sent;
(c) a replay resumed from a checkpoint plans what a full replay with the
    same cold ends plans, in any order and whatever cold ends each
    checkpoint was made with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.billing.breakpoints import CacheLayout, read_layout
from obsmask_core.conversation.billing.ledger import prefix_tokens
from obsmask_core.conversation.billing.price_models import (
    PRICE_MODELS,
    PRICE_UNIT,
    PriceModel,
    openai_cache,
)
from obsmask_core.conversation.billing.terms import BillingTerms
from obsmask_core.conversation.masking.apply import apply_plan
from obsmask_core.conversation.planning.memory import PlanMemory
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from support.billing import chars_of, common_prefix, so_far
from support.conversation_strategies import growing_conversations, policies, requests_of
from support.formats import Event, Say, claude_code_body, convert
from support.resumed_replays import same_plan

FLOAT_EPSILON = 1e-6

priced_policies = st.builds(
    lambda base, **keys: dataclasses.replace(base, **keys),
    policies,
    price_model=st.sampled_from(sorted(PRICE_MODELS)),
    allowance_percent=st.integers(0, 5),
    payback_factor=st.sampled_from([0, 1, 8, 100]),
    holdout_percent=st.integers(0, 9).map(lambda n: 100 if n == 9 else 0),
)
formats = st.sampled_from([CHAT, ANTHROPIC, RESPONSES])
fast = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def conversations(draw: st.DrawFn) -> list[Event]:
    """The frontier's growing conversations, cached from their first request
    or crossing the 1024-token minimum on the way."""
    events = draw(growing_conversations())
    prompt = draw(st.sampled_from(["go", "Fix it. " * 300, "Context: " * 1000]))
    return [Say("user", prompt), *events[1:]]


def sent_requests(events: list[Event], fmt: WireFormat,
                  as_sent: bool) -> Iterator[tuple[list[object], CacheLayout | None]]:
    """Every request's items, and its breakpoints when ``as_sent`` (an
    Anthropic one as Claude Code sends it)."""
    for request in requests_of(events):
        items = convert(fmt, request)
        if as_sent and fmt is ANTHROPIC:
            body = claude_code_body(items)
            items = cast(list[object], body["messages"])
            yield items, read_layout(body, items)
        else:
            yield items, None


def replay(events: list[Event], policy: MaskPolicy, fmt: WireFormat, cold: set[int],
           as_sent: bool = False, doubtful: frozenset[int] = frozenset(),
           ) -> list[tuple[list[object], list[object], MaskPlan]]:
    """Each request as sent, as forwarded, and its plan; the requests whose
    numbers are in ``cold`` came back cold (in ``doubtful``: after a pause
    the cache may have outlived), and every request is planned with the
    cold and doubtful ends among its items, as the table gives them."""
    memory = PlanMemory()
    out = []
    cold_ends: frozenset[int] = frozenset()
    doubtful_ends: frozenset[int] = frozenset()
    for number, (items, layout) in enumerate(sent_requests(events, fmt, as_sent)):
        if number in cold:
            cold_ends |= {len(items)}
        elif number in doubtful:
            doubtful_ends |= {len(items)}
        plan = plan_masking(fmt.index(items), policy, items,
                            terms=BillingTerms(layout=layout, cold_ends=cold_ends,
                                               doubtful_ends=doubtful_ends),
                            memory=memory)
        out.append((items, apply_plan(items, plan, fmt), plan))
    return out


def cold_requests(events: list[Event]) -> st.SearchStrategy[set[int]]:
    return st.sets(st.integers(0, len(requests_of(events)) - 1))


# (a) ---------------------------------------------------------------------------------


@fast
@given(events=conversations(), policy=priced_policies, fmt=formats, as_sent=st.booleans(),
       data=st.data())
def test_the_ledger_keeps_the_bill_within_the_allowance_with_any_cold_requests(
        events, policy, fmt, as_sent, data):
    """Cold requests and requests after a doubtful pause among them."""
    cold = data.draw(cold_requests(events))
    doubtful = frozenset(data.draw(cold_requests(events)))
    for _, _, plan in replay(events, policy, fmt, cold, as_sent, doubtful):
        bill = plan.bill
        if policy.price_model == "none":
            assert bill is None
            continue
        assert bill is not None
        limit = bill.without_masking * (1 + policy.allowance_percent / 100)
        assert bill.with_masking <= limit + FLOAT_EPSILON * max(1.0, limit), bill


# (b) ---------------------------------------------------------------------------------


def rebill(requests: list[list[object]], model: PriceModel, cold: set[int]) -> list[int]:
    """``support.billing.rebill`` under ``model``, sharing nothing with the
    previous request at a cold one."""
    bills, previous = [], cast(list[object], [])
    for number, items in enumerate(requests):
        if number in cold:
            previous = []
        tokens = prefix_tokens(sum(chars_of(item) for item in items), len(items))
        shared = prefix_tokens(*common_prefix(previous, items)) if previous else 0
        bills.append(model.cost(tokens, shared))
        previous = items
    return bills


@fast
@given(events=conversations(),
       policy=priced_policies.filter(lambda p: p.keep_last_k_per_tool == 0
                                     and p.max_input_tokens == 0
                                     and p.price_model != "none"),
       fmt=formats, data=st.data())
def test_the_forwarded_requests_rebilled_apart_with_cold_requests_stay_within_the_allowance(
        events, policy, fmt, data):
    """As ``test_properties_ledger``'s (d), with the tolerance it explains:
    the requests as sent re-bill to the ledger's bill without masking
    exactly (a cold request reads nothing), and the requests as forwarded
    to no more than the allowance above it. Without breakpoints the ledger
    bills every format under OpenAI's prefix cache (``openai_cache``).
    keep_last_k_per_tool and max_input_tokens are left off: with them the
    ledger is known to be optimistic (test_properties_ledger.py's and
    test_frontier_ledger.py's xfails)."""
    cold = data.draw(cold_requests(events))
    requests = replay(events, policy, fmt, cold)
    model = openai_cache(PRICE_MODELS[policy.price_model])
    sent = so_far(rebill([r[0] for r in requests], model, cold))
    forwarded = so_far(rebill([r[1] for r in requests], model, cold))
    tolerance = model.uncached + (model.cache_step - 1) * (model.uncached - model.read)
    for n, ((_, _, plan), plain, masked) in enumerate(zip(requests, sent, forwarded,
                                                          strict=True), 1):
        bill = plan.bill
        assert bill is not None and bill.requests == n
        assert abs(plain / PRICE_UNIT - bill.without_masking) <= FLOAT_EPSILON * plain
        assert masked <= plain * (1 + policy.allowance_percent / 100) + n * tolerance, (
            f"request {n}: forwarded re-billed {masked / PRICE_UNIT}, sent {plain / PRICE_UNIT}")


# (c) ---------------------------------------------------------------------------------


def replayed_in_full(fmt: WireFormat, items: list[object], policy: MaskPolicy,
                     terms: BillingTerms) -> MaskPlan:
    # Without a memory: every result judged afresh, the frontier replayed in full.
    return plan_masking(fmt.index(items), policy, items, terms=terms)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=conversations(), policy=priced_policies, fmt=formats, data=st.data())
def test_a_resumed_replay_with_cold_ends_plans_what_a_full_replay_plans(events, policy, fmt,
                                                                        data):
    """Requests of one conversation in any order, some twice, each with the
    cold and doubtful ends the table has for it then (a pause it learnt of,
    or one it lost): every plan equals the full replay's with the same."""
    memory = PlanMemory()
    requests = list(sent_requests(events, fmt, as_sent=True))
    ends = sorted({len(items) for items, _ in requests})
    order = data.draw(st.lists(st.integers(0, len(requests) - 1), min_size=1, max_size=12))
    for number in order:
        items, layout = requests[number]
        terms = BillingTerms(
            layout=layout,
            cold_ends=frozenset(data.draw(st.sets(st.sampled_from(ends), max_size=3))),
            doubtful_ends=frozenset(data.draw(st.sets(st.sampled_from(ends), max_size=3))))
        resumed = plan_masking(fmt.index(items), policy, items, terms=terms, memory=memory)
        same_plan(resumed, replayed_in_full(fmt, items, policy, terms))
