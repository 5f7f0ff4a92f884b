"""Property-based tests of masking under Anthropic's prompt cache, checked
against a provider written apart from obsmask (``support.caching_provider``):
random conversations sent as Claude Code sends them (a breakpoint at the end
of every request, and on up to three blocks of the tools and system), with
random lifetimes, windows and allowances.

- the client's breakpoints are never moved or removed, and obsmask adds at
  most one (the frontier's), never a fifth, never on a thinking block;
- the bill so far of the requests as forwarded, billed by that provider,
  stays within allowance_percent of the bill of the requests as sent, at
  every request;
- what the ledger predicts the provider reads from and writes to its cache
  is what that provider reports, on every request.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.masking.outcomes import Masked, Refused, Unreadable
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from support.caching_provider import AnthropicPromptCache, Breakpoint, breakpoints
from support.chat import LONG_OUTPUT
from support.formats import Call, Event, Result, Say, Turn, convert, marked_as_claude_code

OUTPUTS = st.sampled_from(["ok", "x" * 400, LONG_OUTPUT, "y" * 9000, "z" * 30_000])
FLOAT_EPSILON = 1e-6


@st.composite
def conversations(draw: st.DrawFn) -> list[Event]:
    """A prompt under or over the cache's minimum, then tool turns of one to
    twelve parallel calls (a turn of twelve adds 25 blocks, past the
    lookback), sometimes an answer without tools and the user's reply."""
    events: list[Event] = [Say("user", draw(st.sampled_from(["go", "Context: " * 1000])))]
    for turn in range(draw(st.integers(1, 12))):
        calls = [Call(f"c{turn}_{n}", draw(st.sampled_from(["bash", "read"])))
                 for n in range(draw(st.sampled_from([1, 1, 2, 12])))]
        events.append(Turn(calls, text=draw(st.sampled_from(["", "t", "thinking " * 30]))))
        events.extend(Result(call.id, draw(OUTPUTS)) for call in calls)
        if draw(st.integers(0, 4)) == 0:
            events += [Say("assistant", "Here is what I found. " * draw(st.integers(1, 40))),
                       Say("user", "go on")]
    return events


def requests_of(events: list[Event]) -> list[list[Event]]:
    """Each prefix that ends before a model answer, then the whole."""
    return [events[:i] for i, e in enumerate(events)
            if isinstance(e, Turn) or (isinstance(e, Say) and e.role == "assistant")] + [events]


policies = st.builds(
    MaskPolicy,
    refetch_guard=st.booleans(),
    window_turns=st.integers(1, 3),
    min_free_percent=st.sampled_from([0, 80]),
    price_model=st.just("anthropic"),
    allowance_percent=st.sampled_from([0, 2, 10]),
    frontier_breakpoint=st.booleans(),
)


def client_body(items: list[object], marked_outside: int, ttl: str | None) -> dict[str, object]:
    """A request as a Claude Code-like client sends it: ``marked_outside``
    breakpoints on the tool and the system blocks, one on its last block,
    all with the lifetime ``ttl``."""
    control: dict[str, object] = {"type": "ephemeral"}
    if ttl is not None:
        control["ttl"] = ttl
    tool: dict[str, object] = {"name": "bash", "description": "Run a command. " * 30,
                               "input_schema": {"type": "object"}}
    system = [{"type": "text", "text": "You are a coding agent."},
              {"type": "text", "text": "Use the tools to change the repository. " * 40}]
    for block in system[2 - min(marked_outside, 2):]:
        block["cache_control"] = control
    if marked_outside > 2:
        tool["cache_control"] = control
    messages = marked_as_claude_code(items)
    last = messages[-1]
    assert isinstance(last, dict) and isinstance(last["content"], list)
    last["content"][-1]["cache_control"] = control
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "tools": [tool],
            "system": system, "messages": messages}


def where(mark: Breakpoint) -> tuple[object, ...]:
    return (mark.part, mark.message, mark.position, json.dumps(mark.cache_control))


fast = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@fast
@example(events=[Say("user", "Context: " * 1000),
                 *[e for t in range(8) for e in (Turn([Call(f"c{t}", "bash")], text="t"),
                                                 Result(f"c{t}", "y" * 9000))]],
         policy=MaskPolicy(window_turns=1, price_model="anthropic", allowance_percent=2,
                           frontier_breakpoint=True),
         marked_outside=2, ttl=None)
@given(events=conversations(), policy=policies, marked_outside=st.integers(0, 3),
       ttl=st.sampled_from([None, "1h"]))
def test_under_anthropics_cache_the_bill_stays_within_the_allowance_and_is_predicted(
        events, policy, marked_outside, ttl):
    sent_cache = AnthropicPromptCache(clock=lambda: 0.0)
    forwarded_cache = AnthropicPromptCache(clock=lambda: 0.0)
    for number, request in enumerate(requests_of(events), 1):
        body = client_body(convert(ANTHROPIC, request), marked_outside, ttl)
        outcome = mask_request_body(json.dumps(body).encode(), policy, ANTHROPIC)
        assert not isinstance(outcome, Refused | Unreadable), outcome
        forwarded = json.loads(outcome.body) if isinstance(outcome, Masked) else body

        # The client's breakpoints stay where they were; obsmask adds at most
        # one, only when asked to, never a fifth (the provider would refuse it).
        theirs = {where(mark) for mark in breakpoints(body)}
        ours = {where(mark) for mark in breakpoints(forwarded)}
        assert theirs <= ours and len(ours) <= 4
        added = ours - theirs
        assert len(added) <= (1 if policy.frontier_breakpoint else 0)
        for part, message, position, control in added:
            assert part == "messages" and control == json.dumps(body["messages"][-1][
                "content"][-1]["cache_control"])
            block = forwarded["messages"][message]["content"][position]
            assert forwarded["messages"][message]["role"] == "assistant"
            assert block["type"] not in ("thinking", "redacted_thinking")

        plain = sent_cache.bill(body)
        masked = forwarded_cache.bill(forwarded)
        # The promise, billed by the provider written apart.
        limit = sent_cache.total_units() * (1 + policy.allowance_percent / 100)
        assert forwarded_cache.total_units() <= limit + FLOAT_EPSILON * limit, (
            f"request {number}: {forwarded_cache.total_units()} > {limit}")
        # And what the ledger said the provider would report.
        bill = outcome.plan.bill if outcome.plan is not None else None
        assert bill is not None and bill.cache == "breakpoints"
        assert (bill.predicted_read, bill.predicted_written) == (
            masked.cache_read_input_tokens, masked.cache_creation_input_tokens), (
            f"request {number}: predicted {bill.predicted_read}/{bill.predicted_written}, "
            f"provider {masked.cache_read_input_tokens}/"
            f"{masked.cache_creation_input_tokens} (as sent {plain.cache_read_input_tokens})")
        assert bill.predicted_input == masked.total_tokens
