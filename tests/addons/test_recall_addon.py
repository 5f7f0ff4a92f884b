"""The Recall addon inside mitmproxy's test context (no network): the proxy
answers ``/obsmask/mcp`` itself when recall is on, to loopback clients
only; the strings handed to it are kept in the store and recalled from
it; a store that fails is logged and never breaks a flow; and the
conversation addon puts a recalled result back when recall is on."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from mitmproxy import http
from mitmproxy.test import taddons, tflow, tutils

from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.recall_addon import RECALL_METADATA, Recall
from obsmask_core.mitm.settings_addon import SettingsFile
from obsmask_core.recall.server import INVALID_PARAMS
from obsmask_core.recall.store import StoreError
from obsmask_core.shared.recall_text import RecallQuery, store_id
from support.chat import body as chat_body
from support.chat import conversation, tool_result, tool_turn

LONG = "".join(f"line {n}\n" for n in range(1, 2001))


@pytest.fixture
def recall(toml_file, tmp_path):
    settings = SettingsFile()
    addon = Recall(settings)
    conversation_addon = ConversationMasking(settings, recall=addon)
    with taddons.context(settings, addon, conversation_addon) as tctx:
        tctx.configure(addon, obsmask_config=toml_file(""),
                       obsmask_recall_enabled=True,
                       obsmask_recall_data_dir=str(tmp_path / "data"),
                       obsmask_window_turns=1)
        yield addon, conversation_addon, tctx
        addon.done()


def rpc(method: str, params: dict[str, object] | None = None, *, peer: str = "127.0.0.1",
        verb: bytes = b"POST") -> http.HTTPFlow:
    message: dict[str, object] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        message["params"] = params
    flow = tflow.tflow(req=tutils.treq(method=verb, path=b"/obsmask/mcp",
                                       content=json.dumps(message).encode()))
    flow.client_conn.peername = (peer, 50000)
    return flow


def recall_call(arguments: dict[str, object], **kwargs: str) -> http.HTTPFlow:
    return rpc("tools/call", {"name": "recall", "arguments": arguments}, **kwargs)


def serve(addon: Recall, flow: http.HTTPFlow) -> None:
    asyncio.run(addon.request(flow))


def answer(flow: http.HTTPFlow) -> dict[str, object]:
    assert flow.response is not None
    reply = json.loads(flow.response.content or b"")
    assert isinstance(reply, dict)
    return reply


def test_the_proxy_answers_the_recall_route_itself(recall):
    """A tools/list on /obsmask/mcp is answered by the proxy (nothing goes
    upstream), and the flow says the recall server answered it."""
    addon, _, _ = recall
    flow = rpc("tools/list")
    serve(addon, flow)
    assert flow.response is not None and flow.response.status_code == 200
    assert answer(flow)["result"]["tools"][0]["name"] == "recall"
    assert Recall.answered(flow)


def test_a_kept_string_is_recalled_whole_and_by_lines(recall):
    """A cut MCP string handed to keep() comes back identical through the
    recall tool, and a line range gives those lines; the flow records the id."""
    addon, _, _ = recall
    recall_id = store_id(LONG)
    addon.keep(recall_id, LONG)
    whole = recall_call({"id": recall_id})
    serve(addon, whole)
    assert answer(whole)["result"]["content"][0]["text"] == LONG
    assert whole.metadata[RECALL_METADATA]["recalled"] == [recall_id]
    part = recall_call({"id": recall_id, "first_line": 5, "last_line": 6})
    serve(addon, part)
    assert answer(part)["result"]["content"][0]["text"] == "line 5\nline 6\n"


def test_a_kept_string_is_written_by_the_stores_thread_and_readable_at_once(recall):
    """keep() returns at once (the store's own thread compresses and writes);
    the string can be recalled before the write ends, and is in the store
    once it has."""
    addon, _, _ = recall
    recall_id = store_id(LONG)
    addon.keep(recall_id, LONG)
    flow = recall_call({"id": recall_id})
    serve(addon, flow)
    assert answer(flow)["result"]["content"][0]["text"] == LONG
    addon.flush()
    assert addon.store is not None
    stored = addon.store.get(recall_id)
    assert stored is not None and stored.text == LONG


def test_an_unknown_id_is_a_json_rpc_error_and_a_log_line(recall, caplog):
    """An id the store does not hold is answered with a JSON-RPC error, and
    the log says so in one line."""
    addon, _, _ = recall
    flow = recall_call({"id": store_id("never kept")})
    with caplog.at_level(logging.WARNING):
        serve(addon, flow)
    assert answer(flow)["error"]["code"] == INVALID_PARAMS
    assert "no text with id" in caplog.text


def test_a_client_off_the_loopback_is_refused(recall):
    """Only loopback clients may recall (the store holds tool output), unless
    allow_clients names their network."""
    addon, _, tctx = recall
    flow = recall_call({"id": "call_1"}, peer="192.0.2.7")
    serve(addon, flow)
    assert flow.response is not None and flow.response.status_code == 403
    tctx.configure(addon, obsmask_recall_allow_clients=["192.0.2.0/24"])
    allowed = recall_call({"id": "call_1"}, peer="192.0.2.7")
    serve(addon, allowed)
    assert allowed.response is not None and allowed.response.status_code == 200


def test_a_get_is_refused_with_405(recall):
    """The server offers no event stream: GET gets 405 and says to POST."""
    addon, _, _ = recall
    flow = rpc("tools/list", verb=b"GET")
    serve(addon, flow)
    assert flow.response is not None and flow.response.status_code == 405
    assert flow.response.headers["allow"] == "POST"


def test_with_recall_off_the_route_says_so_and_keeps_nothing(recall, tmp_path):
    """Recall off: the route answers 404 with a JSON-RPC error naming the
    setting, and keep() writes nothing to disk."""
    addon, _, tctx = recall
    tctx.configure(addon, obsmask_recall_enabled=False)
    flow = rpc("tools/list")
    serve(addon, flow)
    assert flow.response is not None and flow.response.status_code == 404
    assert "obsmask_recall_enabled" in answer(flow)["error"]["message"]
    addon.keep(store_id(LONG), LONG)
    assert not (tmp_path / "data").exists()


def test_a_failing_store_is_logged_and_the_flow_goes_on(recall, caplog, monkeypatch):
    """A store that cannot write is one warning; a store that cannot read
    gives the client a JSON-RPC error, not an exception."""
    addon, _, _ = recall
    assert addon.store is not None

    def broken(*_args: object) -> None:
        raise StoreError("recall store /x: disk I/O error")

    monkeypatch.setattr(addon.store, "put", broken)
    monkeypatch.setattr(addon.store, "get", broken)
    with caplog.at_level(logging.WARNING):
        addon.keep(store_id(LONG), LONG)
        addon.flush()
        flow = recall_call({"id": store_id(LONG)})
        serve(addon, flow)
    assert "not kept: recall store /x: disk I/O error" in caplog.text
    assert "disk I/O error" in answer(flow)["error"]["message"]


def test_the_conversation_addon_puts_the_recalled_text_back(recall):
    """With recall on, a chat request whose recall result is the stub goes
    upstream with the original text of the named result in its place."""
    _, conversation_addon, _ = recall
    messages = conversation(3)
    original = messages[3]["content"]
    messages += [tool_turn("call_r", name="mcp__obsmask__recall"),
                 tool_result("call_r", RecallQuery("call_0_0").stub())]
    flow = tflow.tflow(req=tutils.treq(method=b"POST", path=b"/v1/chat/completions",
                                       content=chat_body(messages)))
    conversation_addon.request(flow)
    sent = json.loads(flow.request.content or b"")["messages"]
    assert sent[-1]["content"] == original
    assert sent[3]["content"].endswith("; recall id=call_0_0]")
    assert flow.metadata["obsmask"]["recalled_tool_results"] == 1
