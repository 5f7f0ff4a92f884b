"""Fixtures of the MCP and gateway addon tests."""

from __future__ import annotations

import pytest
from mitmproxy.test import taddons

from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.settings_addon import SettingsFile
from support.mcp_flows import McpAddons


@pytest.fixture
def context(toml_file):
    addons = McpAddons()
    with taddons.context(addons.settings, addons.gateway, addons.mcp) as tctx:
        tctx.configure(addons.mcp, obsmask_config=toml_file(""))
        yield addons, tctx


@pytest.fixture
def masking(toml_file):
    """The conversation addon in mitmproxy's test context, window of one turn."""
    settings = SettingsFile()
    addon = ConversationMasking(settings)
    with taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_config=toml_file(""), obsmask_window_turns=1)
        yield addon
