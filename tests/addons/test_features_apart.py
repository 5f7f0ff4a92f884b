"""A request the conversation addon read (an LLM request on one of its
routes) is never taken for an MCP call, even when its body names
"jsonrpc" (an agent's tool output may): the MCP addon neither scans it nor
cuts its answer. The same exchange that no conversation route read is MCP."""

from __future__ import annotations

from obsmask_core.mitm.flows import CONVERSATION_METADATA
from obsmask_core.mitm.mcp_addon import METADATA_KEY
from support.mcp_flows import mcp_flow, response_message, run_hooks


def test_a_request_the_conversation_addon_read_is_not_taken_for_mcp(context):
    addons, _ = context
    read = mcp_flow(response_message())
    read.metadata[CONVERSATION_METADATA] = {"action": "unchanged", "format": "chat"}
    run_hooks(addons, read)
    assert read.response.content == response_message()
    assert METADATA_KEY not in read.metadata


def test_the_same_exchange_unread_by_a_conversation_route_is_cut(context):
    addons, _ = context
    flow = mcp_flow(response_message())
    run_hooks(addons, flow)
    assert flow.metadata[METADATA_KEY]["action"] == "truncated"
