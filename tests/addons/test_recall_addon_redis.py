"""The Recall addon with a Redis store (``[recall] store = "redis://..."``),
against a real redis-server on 127.0.0.1: the store and the last-seen table
are the server's; a server that goes away is one warning line however many
flows meet it, each recall of a cut string then answers a JSON-RPC error,
the traceback goes to debug, and once the server is back the same addon
keeps and recalls again by itself."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from mitmproxy import exceptions, http
from mitmproxy.test import taddons, tflow, tutils

from obsmask_core.conversation.billing.last_seen_redis import RedisLastSeen
from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.recall_addon import Recall
from obsmask_core.mitm.settings_addon import SettingsFile
from obsmask_core.recall.redis_store import RedisRecallStore
from obsmask_core.recall.server import STORE_FAILED
from obsmask_core.shared.recall_text import store_id
from support.redis_server import RedisServer, needs_redis

pytestmark = needs_redis

LONG = "".join(f"line {n}\n" for n in range(1, 2001))


@pytest.fixture
def server(tmp_path):
    running = RedisServer(tmp_path / "redis")
    running.start()
    yield running
    running.stop()


@pytest.fixture
def recall(toml_file, tmp_path, server):
    settings = SettingsFile()
    addon = Recall(settings)
    conversation_addon = ConversationMasking(settings, recall=addon)
    with taddons.context(settings, addon, conversation_addon) as tctx:
        tctx.configure(addon, obsmask_config=toml_file(""),
                       obsmask_recall_enabled=True,
                       obsmask_recall_store=server.url,
                       obsmask_recall_store_key_prefix="addon-test:",
                       obsmask_recall_data_dir=str(tmp_path / "data"))
        yield addon, conversation_addon, tctx
        addon.done()


def recall_flow(recall_id: str) -> http.HTTPFlow:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "recall", "arguments": {"id": recall_id}}}
    flow = tflow.tflow(req=tutils.treq(method=b"POST", path=b"/obsmask/mcp",
                                       content=json.dumps(message).encode()))
    flow.client_conn.peername = ("127.0.0.1", 50000)
    return flow


def recalled(addon: Recall, recall_id: str) -> dict[str, object]:
    flow = recall_flow(recall_id)
    asyncio.run(addon.request(flow))
    assert flow.response is not None
    reply = json.loads(flow.response.content or b"")
    assert isinstance(reply, dict)
    return reply


def test_a_redis_url_in_store_keeps_cut_strings_and_the_last_seen_table_there(recall,
                                                                              server):
    addon, conversation_addon, _ = recall
    assert isinstance(addon.store, RedisRecallStore) and addon.store.where == server.url
    assert isinstance(addon.shared_last_seen, RedisLastSeen)
    addon.keep(store_id(LONG), LONG)
    addon.flush()
    assert server.client().exists(f"addon-test:recall:{store_id(LONG)}") == 1
    reply = recalled(addon, store_id(LONG))
    assert reply["result"]["content"][0]["text"] == LONG
    live = tflow.tflow()
    assert conversation_addon.visit(live).table is addon.shared_last_seen
    replayed = tflow.tflow()
    replayed.live = False
    assert conversation_addon.visit(replayed).table is conversation_addon.last_seen


def test_share_last_seen_false_leaves_the_table_in_each_proxy(recall):
    addon, conversation_addon, tctx = recall
    tctx.configure(addon, obsmask_recall_share_last_seen=False)
    assert addon.shared_last_seen is None
    assert conversation_addon.visit(tflow.tflow()).table is conversation_addon.last_seen


@pytest.mark.parametrize("value", ["http://127.0.0.1:6379", "redis://127.0.0.1:port/0",
                                   "mysql://x"])
def test_a_store_that_is_neither_sqlite_nor_a_redis_url_is_refused_at_configure(recall,
                                                                                 value):
    addon, _, tctx = recall
    with pytest.raises(exceptions.OptionsError, match="store"):
        tctx.configure(addon, obsmask_recall_store=value)


def test_a_server_gone_is_one_warning_errors_to_recalls_and_back_by_itself(recall, server,
                                                                           caplog):
    addon, _, _ = recall
    before = "before the outage\n" * 500
    addon.keep(store_id(before), before)
    addon.flush()
    server.stop()
    with caplog.at_level(logging.DEBUG):
        for n in range(5):
            text = f"cut during the outage {n}\n" * 500
            addon.keep(store_id(text), text)  # never raises: the answer goes out cut
        addon.flush()
        replies = [recalled(addon, store_id(before)) for _ in range(3)]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "not kept" in warnings[0].getMessage()
    assert server.url in warnings[0].getMessage()
    assert any(r.levelno == logging.DEBUG and r.exc_info for r in caplog.records)
    for reply in replies:
        assert reply["error"]["code"] == STORE_FAILED
        assert "the store cannot be read" in reply["error"]["message"]
        assert server.url in reply["error"]["message"]
    caplog.clear()
    server.start()
    with caplog.at_level(logging.INFO):
        assert recalled(addon, store_id(before))["result"]["content"][0]["text"] == before
        after = "after the outage\n" * 500
        addon.keep(store_id(after), after)
        addon.flush()
        assert recalled(addon, store_id(after))["result"]["content"][0]["text"] == after
    assert "recall store: works again" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
