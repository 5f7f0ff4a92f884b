"""The providers' cache diagnostics: when an answer says why the prompt cache
missed (Anthropic's ``diagnostics.cache_miss_reason``, OpenAI's
``prompt_cache_diagnostics``, which only a client that asks for them gets),
the flow's usage keeps the reason and the totals count the reasons. A shape
obsmask does not know is no reason, and never breaks the usage."""

from __future__ import annotations

import json

import pytest

from obsmask_core.conversation.usage.provider_usage import (
    REASON_CHARS,
    usage_from_json,
    usage_in_object,
)
from obsmask_core.totals.totals import Totals


def answered(conversation: str, usage: dict[str, object]) -> dict[str, object]:
    """An unchanged request's metadata with the provider's usage of its answer."""
    return {"action": "unchanged", "format": "anthropic", "conversation": conversation,
            "provider_usage": usage}


ANTHROPIC = {"id": "msg_2", "type": "message", "role": "assistant", "content": [],
             "usage": {"input_tokens": 12, "cache_read_input_tokens": 0,
                       "cache_creation_input_tokens": 900, "output_tokens": 5},
             "diagnostics": {"cache_miss_reason": {"type": "tools_changed",
                                                   "cache_missed_input_tokens": 880}}}


def test_an_anthropic_answer_s_miss_reason_is_kept_beside_its_usage():
    usage = usage_from_json(json.dumps(ANTHROPIC).encode())
    assert usage is not None and usage.cache_miss_reason == "tools_changed"
    assert usage.as_metadata()["cache_miss_reason"] == "tools_changed"
    assert usage.cache_creation_input_tokens == 900


def test_a_streamed_anthropic_answer_gives_its_reason_on_message_start():
    start = {"type": "message_start", "message": {**ANTHROPIC, "usage": {
        "input_tokens": 12, "cache_read_input_tokens": 0, "output_tokens": 1}}}
    usage = usage_in_object(start)
    assert usage is not None and usage.cache_miss_reason == "tools_changed"
    later = usage_in_object({"type": "message_delta", "usage": {"output_tokens": 9}})
    assert later is not None and usage.updated_by(later).cache_miss_reason == "tools_changed"


@pytest.mark.parametrize("diagnostics, reason", [
    ({"cache_miss_reason": "messages_changed"}, "messages_changed"),
    ({"reason": {"type": "model_changed"}}, "model_changed"),
    ("previous_response_not_found", "previous_response_not_found"),
])
def test_an_openai_answer_s_prompt_cache_diagnostics_give_its_reason(diagnostics, reason):
    answer = {"object": "response", "usage": {"input_tokens": 2000, "output_tokens": 3,
                                              "input_tokens_details": {"cached_tokens": 0}},
              "prompt_cache_diagnostics": diagnostics}
    usage = usage_from_json(json.dumps(answer).encode())
    assert usage is not None and usage.cache_miss_reason == reason


@pytest.mark.parametrize("diagnostics", [
    None, {}, {"cache_miss_reason": None}, {"cache_miss_reason": 7},
    {"cache_miss_reason": {"type": ""}}, ["tools_changed"], "",
])
def test_a_diagnostic_of_another_shape_is_no_reason_and_the_usage_stands(diagnostics):
    answer = {**ANTHROPIC, "diagnostics": diagnostics}
    usage = usage_from_json(json.dumps(answer).encode())
    assert usage is not None and usage.cache_miss_reason is None
    assert "cache_miss_reason" not in usage.as_metadata()
    assert usage.input_tokens == 12


def test_a_long_reason_is_cut():
    answer = {**ANTHROPIC, "diagnostics": {"cache_miss_reason": {"type": "x" * 10_000}}}
    usage = usage_from_json(json.dumps(answer).encode())
    assert usage is not None and usage.cache_miss_reason == "x" * REASON_CHARS


def test_the_totals_count_the_reasons_and_put_many_distinct_ones_together():
    totals = Totals()
    for reason in ("tools_changed", "tools_changed", "model_changed"):
        totals.add_flow(answered("c-a", {"input_tokens": 5, "cache_miss_reason": reason}), None)
    totals.add_flow(answered("c-a", {"input_tokens": 5}), None)
    assert totals.requests.as_json()["cache_miss_reasons"] == {"model_changed": 1,
                                                               "tools_changed": 2}
    for number in range(100):
        totals.add_flow(answered("c-b", {"input_tokens": 5, "cache_miss_reason": f"r{number}"}),
                        None)
    reasons = totals.requests.as_json()["cache_miss_reasons"]
    assert isinstance(reasons, dict) and len(reasons) == 33 and reasons["other"] == 70
