"""The ConversationMasking addon with cold_turns, on an injected clock: a
request that comes more than the cache's lifetime (the provider's, and a
minute for clock differences, or cold_after_seconds) after its
conversation's previous one is billed as cold, and the frontier catches up
there; the requests after it keep its decisions."""

from __future__ import annotations

import json

import pytest
from mitmproxy.test import taddons, tflow, tutils

from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, WireFormat
from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.settings_addon import SettingsFile
from support.formats import Call, Event, Result, Say, Turn, claude_code_body, convert

MEDIUM, BIG = "m" * 3000, "B" * 20_000
# Four results out of the window at the fifth request, each too small to
# pay for its move on a warm cache (test_frontier_cold.py).
EVENTS: list[Event] = [Say("user", "u" * 8000)]
for _turn, _output in enumerate([MEDIUM] * 6 + [BIG]):
    EVENTS += [Turn([Call(f"c{_turn}", "bash")], text="t" * 2000), Result(f"c{_turn}", _output)]
CAUGHT_UP = ["c0", "c1", "c2", "c3"]
SETTINGS = """[observation_masking.schema1]
window_turns = 1
min_free_percent = 80
price_model = "anthropic"
allowance_percent = 2
cold_turns = true
"""
PATHS = {ANTHROPIC: b"/v1/messages", CHAT: b"/v1/chat/completions"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def masking(toml_file):
    clock = Clock()
    settings = SettingsFile()
    addon = ConversationMasking(settings, clock=clock)
    with taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_config=toml_file(SETTINGS))
        yield addon, tctx, clock


def flow_after(turns: int, fmt: WireFormat = ANTHROPIC) -> tflow.HTTPFlow:
    """The request sent after ``turns`` tool turns (an Anthropic one as
    Claude Code sends it)."""
    items = convert(fmt, EVENTS[: 1 + 2 * turns])
    members = claude_code_body(items) if fmt is ANTHROPIC else {"model": "m", "messages": items}
    request = tutils.treq(method=b"POST", path=PATHS[fmt], content=b"")
    request.raw_content = json.dumps(members).encode()
    request.headers["content-type"] = "application/json"
    request.headers["content-length"] = str(len(request.raw_content))
    return tflow.tflow(req=request)


def sent(addon: ConversationMasking, turns: int, fmt: WireFormat = ANTHROPIC) -> tflow.HTTPFlow:
    flow = flow_after(turns, fmt)
    addon.request(flow)
    return flow


def masked_calls(flow: tflow.HTTPFlow) -> list[str]:
    """The calls whose results went out as the placeholder."""
    calls = []
    for message in json.loads(flow.request.content or b"")["messages"]:
        if message.get("role") == "tool":  # Chat Completions
            blocks = [{"tool_use_id": message["tool_call_id"], "content": message["content"]}]
        elif isinstance(message.get("content"), list):
            blocks = [b for b in message["content"] if b.get("type") == "tool_result"]
        else:
            continue
        calls += [b["tool_use_id"] for b in blocks
                  if "Observation masquée" in json.dumps(b["content"], ensure_ascii=False)]
    return calls


def bill_of(flow: tflow.HTTPFlow) -> dict[str, object]:
    bill = flow.metadata["obsmask"]["bill"]
    assert isinstance(bill, dict)
    return bill


def test_a_request_six_minutes_after_the_previous_one_catches_up(masking):
    addon, _, clock = masking
    for turns in range(1, 5):
        assert masked_calls(sent(addon, turns)) == []
        clock.now += 30
    clock.now += 6 * 60
    cold = sent(addon, 5)
    assert masked_calls(cold) == CAUGHT_UP
    bill = bill_of(cold)
    assert bill["cold_ends"] == [11] and bill["ratio"] < 1
    # The next requests, on a warm cache again, keep what went out.
    for turns in (6, 7):
        clock.now += 30
        later = sent(addon, turns)
        assert masked_calls(later)[:4] == CAUGHT_UP
        assert bill_of(later)["cold_ends"] == [11]


def test_a_request_within_the_lifetime_does_not_catch_up(masking):
    addon, _, clock = masking
    for turns in range(1, 6):
        clock.now += 4 * 60
        flow = sent(addon, turns)
        assert masked_calls(flow) == [] and bill_of(flow)["cold_ends"] == []


def test_an_openai_request_is_cold_only_once_its_cache_is_gone_for_certain(masking):
    """OpenAI's in-memory cache may outlive a pause of six minutes (it is
    cleared within an hour): the request is billed warm; after an hour and
    the minute's margin, cold."""
    addon, _, clock = masking
    for turns in range(1, 5):
        sent(addon, turns, CHAT)
        clock.now += 30
    clock.now += 6 * 60
    assert bill_of(sent(addon, 5, CHAT))["cold_ends"] == []
    clock.now += 3600 + 30
    assert bill_of(sent(addon, 6, CHAT))["cold_ends"] == []
    clock.now += 3600 + 61
    cold = sent(addon, 6, CHAT)
    assert bill_of(cold)["cold_ends"] == [13] and masked_calls(cold)[:4] == CAUGHT_UP


def test_a_pause_shorter_than_the_lifetime_and_its_margin_is_warm(masking):
    """Anthropic's entries live five minutes; the pause is measured on the
    proxy's clock, from the previous request's arrival, so a minute more
    must pass before the request is taken for cold."""
    addon, _, clock = masking
    for turns in range(1, 5):
        sent(addon, turns)
        clock.now += 30
    clock.now += 320
    assert bill_of(sent(addon, 5))["cold_ends"] == []


def test_cold_after_seconds_is_the_users_lifetime_taken_as_given(masking):
    """A gateway or provider whose cache lives two minutes: the setting says
    so, and a pause of three minutes is cold."""
    addon, tctx, clock = masking
    tctx.configure(addon, obsmask_cold_turns=False, obsmask_cold_after_seconds=120)
    for turns in range(1, 5):
        sent(addon, turns)
        clock.now += 30
    clock.now += 180
    cold = sent(addon, 5)
    assert bill_of(cold)["cold_ends"] == [11] and masked_calls(cold) == CAUGHT_UP


def test_with_cold_turns_off_a_long_pause_changes_nothing(masking):
    addon, tctx, clock = masking
    tctx.configure(addon, obsmask_cold_turns=False)
    for turns in range(1, 5):
        sent(addon, turns)
    clock.now += 3600
    assert masked_calls(sent(addon, 5)) == []
    assert len(addon.last_seen) == 0


def test_a_flow_read_from_a_file_is_timed_by_when_it_was_recorded(masking):
    """mitmdump -nr replays a session in seconds: the pauses are those the
    flows recorded, not the replay's."""
    addon, _, _ = masking
    start = 1_700_000_000.0
    flows = [flow_after(turns) for turns in range(1, 6)]
    for number, flow in enumerate(flows):
        flow.live = False
        flow.request.timestamp_start = start + 30 * number + (360 if number == 4 else 0)
        addon.request(flow)
    assert masked_calls(flows[-1]) == CAUGHT_UP
