"""Token figures never hold a request up: a masked result's text that was
never counted is estimated from its length (and the metadata and comment say
so) while the background thread counts it, so the conversation's next
request, which carries it again, gets the exact figure. A flow read from a
file, which nobody waits for, is counted exactly at once."""

from __future__ import annotations

import time

from mitmproxy.test import taddons

from obsmask_core.mitm.mcp_addon import METADATA_KEY
from obsmask_core.shared.tokens import TokenCounter
from support.chat import body, conversation
from support.conversation_flows import chat_flow
from support.mcp_flows import McpAddons, mcp_flow, response_message, run_hooks


def test_texts_never_counted_are_estimated_then_exact_on_the_next_request(masking):
    assert masking.tokens.wait_until_loaded(60)
    content = body(conversation(turns=3))
    first = chat_flow(content)
    masking.request(first)
    meta = first.metadata["obsmask"]
    assert meta["tokens_estimated"] is True
    assert meta["masked_tokens_before"] > meta["masked_tokens_after"] > 0
    assert "estimated" in first.comment
    deadline = time.monotonic() + 20
    while True:
        again = chat_flow(content)
        masking.request(again)
        if "tokens_estimated" not in again.metadata["obsmask"] or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    meta = again.metadata["obsmask"]
    assert "tokens_estimated" not in meta and "estimated" not in again.comment
    # What a counter that has seen nothing counts on the spot (a flow read
    # from a file) for the same request.
    masking.tokens = TokenCounter()
    assert masking.tokens.wait_until_loaded(60)
    replayed = chat_flow(content)
    replayed.live = False
    masking.request(replayed)
    counted = replayed.metadata["obsmask"]
    assert "tokens_estimated" not in counted
    assert (meta["masked_tokens_before"], meta["masked_tokens_after"]) == (
        counted["masked_tokens_before"], counted["masked_tokens_after"])


def test_a_flow_read_from_a_file_is_counted_exactly_at_once(masking):
    assert masking.tokens.wait_until_loaded(60)
    flow = chat_flow(body(conversation(turns=3)))
    flow.live = False
    masking.request(flow)
    meta = flow.metadata["obsmask"]
    assert "tokens_estimated" not in meta
    assert meta["masked_tokens_before"] > meta["masked_tokens_after"] > 0


def test_an_mcp_cut_is_estimated_while_the_answer_waits_and_says_so(toml_file):
    """A cut string is seen once: its tokens are estimated, never counted on
    the answer's way, and the metadata and comment say it is an estimate."""
    addons = McpAddons()
    with taddons.context(addons.settings, addons.gateway, addons.mcp) as tctx:
        tctx.configure(addons.mcp, obsmask_config=toml_file(""))
        assert addons.mcp.tokens.wait_until_loaded(60)
        flow = mcp_flow(response_message())
        run_hooks(addons, flow)
    summary = flow.metadata[METADATA_KEY]
    assert summary["tokens_estimated"] is True and summary["tokens_saved"] > 0
    assert "estimated" in flow.comment
