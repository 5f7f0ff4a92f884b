"""A request whose model the model table does not know is billed under its
provider's most cautious terms, and the proxy says so once per model."""

from __future__ import annotations

import logging

import pytest
from mitmproxy.test import taddons

from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.settings_addon import SettingsFile
from support.chat import body, conversation
from support.conversation_flows import chat_flow


@pytest.fixture
def auto_masking(toml_file):
    settings = SettingsFile()
    addon = ConversationMasking(settings)
    with taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_config=toml_file(""), obsmask_window_turns=1,
                       obsmask_price_model="auto")
        yield addon


def unknown_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "not in the model table" in r.getMessage()]


def test_an_unknown_model_is_told_once_and_its_flows_name_the_cautious_row(auto_masking, caplog):
    flows = [chat_flow(body(conversation(turns), model="house-model-7")) for turns in (3, 4, 5)]
    with caplog.at_level(logging.INFO):
        for flow in flows:
            auto_masking.request(flow)
    [line] = unknown_lines(caplog)
    assert "house-model-7" in line and "openai-unknown" in line
    for flow in flows:
        row = flow.metadata["obsmask"]["bill"]["model_row"]
        assert (row["row"], row["model"], row["known"]) \
            == ("openai-unknown", "house-model-7", False)


def test_a_known_model_is_not_told_and_its_flow_names_its_row(auto_masking, caplog):
    flow = chat_flow(body(conversation(4), model="gpt-5.6"))
    with caplog.at_level(logging.INFO):
        auto_masking.request(flow)
    assert unknown_lines(caplog) == []
    row = flow.metadata["obsmask"]["bill"]["model_row"]
    assert (row["row"], row["known"], row["cache"]) == ("gpt-5.6", True, "openai_prefix")
