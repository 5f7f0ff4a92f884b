"""The ProviderBrake addon (``mitm/brake_addon.py``) behind the conversation
addon, in mitmproxy's test context: an answer whose figures are what the
ledger predicted leaves the conversation alone; one that bills past the
allowance brakes it (one log line, the flow's comment and metadata), and
its next request is planned from the brake; an answer whose usage or bill
cannot be read changes nothing and raises nothing; with provider_brake
off, nothing is weighed."""

from __future__ import annotations

import json
import logging
from unittest import mock

import pytest
from mitmproxy.test import taddons, tflow, tutils

from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from obsmask_core.mitm.brake_addon import ProviderBrake
from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.settings_addon import SettingsFile
from support.formats import Call, Event, Result, Say, Turn, claude_code_body, convert

EVENTS: list[Event] = [Say("user", "u" * 8000)]
for _turn in range(6):
    EVENTS += [Turn([Call(f"c{_turn}", "bash")], text="t" * 200),
               Result(f"c{_turn}", "B" * 20_000)]
SETTINGS = """[observation_masking.schema1]
window_turns = 1
min_free_percent = 80
price_model = "anthropic"
allowance_percent = 2
provider_brake = {brake}
"""


@pytest.fixture
def addons(toml_file, request):
    brake = getattr(request, "param", True)
    settings = SettingsFile()
    masking = ConversationMasking(settings)
    braking = ProviderBrake(masking)
    with taddons.context(settings, masking, braking) as tctx:
        tctx.configure(masking, obsmask_config=toml_file(
            SETTINGS.format(brake=str(brake).lower())))
        yield masking, braking


def flow_after(turns: int) -> tflow.HTTPFlow:
    items = convert(ANTHROPIC, EVENTS[: 1 + 2 * turns])
    request = tutils.treq(method=b"POST", path=b"/v1/messages", content=b"")
    request.raw_content = json.dumps(claude_code_body(items)).encode()
    request.headers["content-type"] = "application/json"
    request.headers["content-length"] = str(len(request.raw_content))
    return tflow.tflow(req=request)


def answered(addons, turns: int, usage: object | None = None, raw: bytes | None = None,
             ) -> tflow.HTTPFlow:
    """The request after ``turns`` tool turns through the conversation
    addon, answered with ``usage`` (None: the figures the ledger predicted)
    or the bytes ``raw``, and weighed by the brake."""
    masking, braking = addons
    flow = flow_after(turns)
    masking.request(flow)
    if raw is None:
        if usage is None:
            predicted = flow.metadata["obsmask"]["bill"]["predicted"]
            usage = {"input_tokens": predicted["input_tokens"] - predicted["cache_read_tokens"]
                     - predicted["cache_write_tokens"],
                     "cache_read_input_tokens": predicted["cache_read_tokens"],
                     "cache_creation_input_tokens": predicted["cache_write_tokens"]}
        raw = json.dumps({"type": "message", "role": "assistant", "content": [],
                          "usage": {**usage, "output_tokens": 5}}).encode()
    flow.response = tutils.tresp(content=raw, headers=[(b"content-type", b"application/json")])
    masking.response(flow)
    braking.response(flow)
    return flow


def test_figures_as_predicted_leave_the_conversation_alone(addons):
    for turns in range(1, 7):
        flow = answered(addons, turns)
        brake = flow.metadata["obsmask"]["brake"]
        assert brake["surprise"] == 0 and "braked_from" not in brake, turns
        assert "braked_from" not in flow.metadata["obsmask"]["bill"]


def test_an_answer_billed_past_the_allowance_brakes_the_conversation(addons, caplog):
    """Request 3's answer reports a read of 500 tokens and the rest written:
    far past what the ledger allowed. Its flow says so, once in the log; the
    requests after it are planned from the end after it, their frontier
    where it stood."""
    answered(addons, 1)
    answered(addons, 2)
    with caplog.at_level(logging.WARNING):
        flow = answered(addons, 3, {"input_tokens": 0, "cache_read_input_tokens": 500,
                                    "cache_creation_input_tokens": 39_500})
    brake = flow.metadata["obsmask"]["brake"]
    items = flow.metadata["obsmask"]["bill"]["request_items"]
    assert brake["tripped"] is True and brake["braked_from"] == items + 1
    assert brake["surprise"] > brake["room"]
    assert [r for r in caplog.records if "provider brake" in r.getMessage()]
    assert "provider brake" in flow.comment
    frontier = flow.metadata["obsmask"].get("frontier_turn")
    for turns in (4, 5, 6):
        later = answered(addons, turns)
        meta = later.metadata["obsmask"]
        assert meta["bill"]["braked_from"] == items + 1
        assert meta.get("frontier_turn") == frontier
        assert "tripped" not in meta["brake"]


def test_an_answer_that_read_nothing_is_an_expired_cache_and_brakes_nothing(addons):
    """A full miss (a pause past the cache's lifetime, an eviction) meets
    the request as the client sent it alike: no surprise, no brake."""
    answered(addons, 1)
    answered(addons, 2)
    flow = answered(addons, 3, {"input_tokens": 0, "cache_read_input_tokens": 0,
                                "cache_creation_input_tokens": 40_000})
    brake = flow.metadata["obsmask"]["brake"]
    assert brake["surprise"] == 0 and "tripped" not in brake
    assert "braked_from" not in flow.metadata["obsmask"]["bill"]


@pytest.mark.parametrize("raw", [
    b"not json", b"{}", json.dumps({"usage": {"input_tokens": "many"}}).encode(),
    json.dumps({"usage": {"input_tokens": 10, "cache_read_input_tokens": -5}}).encode(),
    json.dumps({"usage": [1, 2]}).encode()])
def test_an_answer_whose_usage_cannot_be_read_changes_nothing(addons, raw):
    flow = answered(addons, 3, raw=raw)
    assert "brake" not in flow.metadata["obsmask"]
    assert addons[0].last_seen.braked_from(flow.metadata["obsmask"]["conversation"]) is None


def test_a_flow_without_a_bill_or_metadata_is_not_weighed(addons):
    _, braking = addons
    bare = tflow.tflow(resp=True)
    braking.response(bare)
    braking.error(bare)
    assert "obsmask" not in bare.metadata
    odd = tflow.tflow(resp=True)
    odd.metadata["obsmask"] = {"bill": "nonsense", "provider_usage": {}, "conversation": 3}
    braking.response(odd)
    assert "brake" not in odd.metadata["obsmask"]


@pytest.mark.parametrize("addons", [False], indirect=True)
def test_with_provider_brake_off_nothing_is_weighed(addons):
    flow = answered(addons, 3, {"input_tokens": 0, "cache_read_input_tokens": 0,
                                "cache_creation_input_tokens": 40_000})
    assert "brake" not in flow.metadata["obsmask"]
    assert addons[0].last_seen.braked_from(flow.metadata["obsmask"]["conversation"]) is None


def _anthropic_events(usage: dict[str, int]) -> bytes:
    start = {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-5", "usage": {**usage, "output_tokens": 1}}}
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"output_tokens": 5}}
    return (f"event: message_start\ndata: {json.dumps(start)}\n\n"
            f"event: message_delta\ndata: {json.dumps(delta)}\n\n").encode()


def test_a_streamed_answer_is_weighed_before_its_end_reaches_the_client(addons):
    """The client sends the conversation's next request as soon as it has
    the whole answer: the answer's figures are weighed while its last
    events pass, so that next request, planned before the stream's
    ``response`` hook has run, already finds the brake."""
    masking, _ = addons
    answered(addons, 1)
    answered(addons, 2)
    flow = flow_after(3)
    masking.request(flow)
    flow.response = tutils.tresp(content=b"", headers=[(b"content-type", b"text/event-stream")])
    masking.responseheaders(flow)
    tap = flow.response.stream
    assert callable(tap)
    events = _anthropic_events({"input_tokens": 0, "cache_read_input_tokens": 500,
                                "cache_creation_input_tokens": 39_500})
    assert tap(events) == events  # every byte goes on, the last events with it
    brake = flow.metadata["obsmask"]["brake"]
    items = flow.metadata["obsmask"]["bill"]["request_items"]
    assert brake["tripped"] is True and brake["braked_from"] == items + 1
    # The next request, before the stream ended or any response hook ran.
    following = flow_after(4)
    masking.request(following)
    assert following.metadata["obsmask"]["bill"]["braked_from"] == items + 1
    # The stream's end and its hooks weigh the answer no second time.
    _, braking = addons
    with mock.patch.object(masking.last_seen, "add_surprise",
                           wraps=masking.last_seen.add_surprise) as added:
        assert tap(b"") == b""
        masking.response(flow)
        braking.response(flow)
        braking.error(flow)
    assert added.call_count == 0
    assert flow.metadata["obsmask"]["brake"] == brake
