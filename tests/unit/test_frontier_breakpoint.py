"""The frontier breakpoint (``frontier_breakpoint``): once results are masked
in an Anthropic request whose client marks its end and leaves a breakpoint
slot free, the last block of the assistant message of the frontier's turn
carries a copy of the client's ``cache_control``; it is the one change
outside tool results, made in the client's bytes, and the rules check
allows exactly it."""

from __future__ import annotations

import copy
import json

import pytest

from obsmask_core.conversation.masking.invariants import check_only_planned_changes
from obsmask_core.conversation.masking.outcomes import Masked, Unchanged
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from support.formats import Call, Event, Result, Say, Turn, claude_code_body, convert

POLICY = MaskPolicy(window_turns=1, price_model="anthropic", allowance_percent=2,
                    frontier_breakpoint=True)
BIG = "line of output\n" * 2000


def session(turns: int) -> list[Event]:
    events: list[Event] = [Say("user", "Context: " * 1000)]
    for turn in range(turns):
        events += [Turn([Call(f"c{turn}", "Bash")], text="Let me look."),
                   Result(f"c{turn}", BIG)]
    return events


def body_of(events: list[Event], **changes: object) -> dict[str, object]:
    body = claude_code_body(convert(ANTHROPIC, events))
    body.update(changes)
    return body


def masked(body: dict[str, object], policy: MaskPolicy = POLICY) -> Masked:
    raw = json.dumps(body).encode()
    outcome = mask_request_body(raw, policy, ANTHROPIC)
    assert isinstance(outcome, Masked), outcome
    return outcome


def test_the_breakpoint_goes_on_the_frontier_turns_call_copying_the_clients():
    body = body_of(session(4))
    outcome = masked(body)
    added = outcome.plan.breakpoint
    assert added is not None and added.control == {"type": "ephemeral"}
    forwarded = json.loads(outcome.body)
    message = forwarded["messages"][added.item]
    assert message["role"] == "assistant"
    # The frontier's turn is the first whose results are not decided: its
    # results come right after this message.
    frontier = outcome.plan.frontier_turn
    assert message["content"][added.block] == {
        "type": "tool_use", "id": f"c{frontier}", "input": {"c": 1}, "name": "Bash",
        "cache_control": {"type": "ephemeral"}}
    assert added.block == len(message["content"]) - 1


def test_every_other_byte_is_the_clients_or_a_planned_text():
    """The forwarded body, with the one inserted member taken out again, is
    the client's body with the planned results replaced, byte for byte."""
    body = body_of(session(4))
    raw = json.dumps(body).encode()
    outcome = masked(body)
    assert outcome.body.count(b'"cache_control"') == raw.count(b'"cache_control"') + 1
    without = outcome.body.replace(b',"cache_control":{"type":"ephemeral"}}', b"}", 1)
    expected = copy.deepcopy(body)
    for decision in outcome.plan.decisions:
        item, block = decision.location[0], decision.location[1]
        expected["messages"][item]["content"][block]["content"] = decision.new_text
    assert json.loads(without) == expected
    # Only the placeholders and the member: the client's own separators stay.
    def written(text: str) -> int:
        return len(json.dumps(text, ensure_ascii=False).encode())

    assert len(outcome.body) == len(raw) - sum(
        len(json.dumps(d.original)) - written(d.new_text)
        for d in outcome.plan.decisions) + len(b',"cache_control":{"type":"ephemeral"}')


def test_the_same_request_gets_the_same_breakpoint_every_time():
    body = body_of(session(5))
    first, again = masked(body), masked(body)
    assert first.body == again.body and first.plan.breakpoint == again.plan.breakpoint


def test_an_hours_lifetime_is_copied_so_the_order_of_lifetimes_holds():
    body = body_of(session(4))
    for block in body["system"]:
        block["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    body["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    outcome = masked(body)
    assert outcome.plan.breakpoint is not None
    assert outcome.plan.breakpoint.control == {"type": "ephemeral", "ttl": "1h"}


def test_off_no_breakpoint_is_added():
    outcome = masked(body_of(session(4)),
                     MaskPolicy(window_turns=1, price_model="anthropic", allowance_percent=2))
    assert outcome.plan.breakpoint is None
    assert b'"cache_control"' not in outcome.body.split(b'"messages"')[1][:-200]


def test_no_fifth_breakpoint_when_the_client_uses_four():
    body = body_of(session(4), tools=[{"name": "Bash", "cache_control": {"type": "ephemeral"}}])
    outcome = masked(body)
    assert outcome.plan.decisions and outcome.plan.breakpoint is None
    assert outcome.body.count(b'"cache_control"') == 4


def test_no_breakpoint_when_the_client_does_not_mark_the_end_of_its_request():
    body = body_of(session(4))
    del body["messages"][-1]["content"][-1]["cache_control"]
    raw = json.dumps(body).encode()
    outcome = mask_request_body(raw, POLICY, ANTHROPIC)
    assert outcome.plan is not None and outcome.plan.breakpoint is None


def test_no_breakpoint_before_anything_is_masked():
    outcome = mask_request_body(json.dumps(body_of(session(1))).encode(), POLICY, ANTHROPIC)
    assert isinstance(outcome, Unchanged)


@pytest.mark.parametrize("change", ["moved", "removed", "another", "other field"])
def test_the_rules_check_refuses_any_breakpoint_change_but_the_planned_one(change):
    body = body_of(session(4))
    outcome = masked(body)
    plan, added = outcome.plan, outcome.plan.breakpoint
    assert added is not None
    forwarded = json.loads(outcome.body)["messages"]
    assert check_only_planned_changes(body["messages"], forwarded, plan, ANTHROPIC) == []
    broken = copy.deepcopy(forwarded)
    block = broken[added.item]["content"][added.block]
    if change == "moved":
        del block["cache_control"]
        broken[added.item]["content"][0]["cache_control"] = {"type": "ephemeral"}
    elif change == "removed":
        del broken[-1]["content"][-1]["cache_control"]
    elif change == "another":
        block["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    else:
        block["name"] = "Other"
    assert check_only_planned_changes(body["messages"], broken, plan, ANTHROPIC) != []


def test_a_breakpoint_inside_a_tool_results_content_counts_toward_the_four():
    """The API counts a cache_control on a text block inside a tool_result:
    with it the client uses four, and none is added."""
    body = body_of(session(6))
    body["tools"] = [{"name": "Bash"}]
    body["messages"][-1]["content"][0]["content"] = [
        {"type": "text", "text": "short", "cache_control": {"type": "ephemeral"}}]
    outcome = masked(body)
    assert outcome.plan.decisions and outcome.plan.breakpoint is None


def test_the_lifetime_copied_is_the_next_client_breakpoints_so_longer_ones_stay_first():
    """A client breakpoint of an hour after the frontier, then one of five
    minutes at the end: the added one, before both, takes the hour."""
    body = body_of(session(6))
    hour = {"type": "ephemeral", "ttl": "1h"}
    for block in body["system"]:
        block["cache_control"] = hour
    del body["system"][0]["cache_control"]
    body["messages"][-3]["content"][-1]["cache_control"] = hour
    outcome = masked(body, MaskPolicy(window_turns=3, price_model="none",
                                      frontier_breakpoint=True))
    added = outcome.plan.breakpoint
    assert added is not None and added.item < len(body["messages"]) - 3
    assert added.control == hour


def test_a_client_control_json_cannot_write_leaves_the_body_as_sent():
    body = body_of(session(4))
    body["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral",
                                                            "n": float("nan")}
    raw = json.dumps(body).encode()
    outcome = mask_request_body(raw, POLICY, ANTHROPIC)
    assert not isinstance(outcome, Masked) or b"NaN" not in outcome.body.split(
        b'"messages"')[1][:-400]
