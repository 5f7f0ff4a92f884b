"""The McpTruncation addon inside mitmproxy's test context (no network):
configuration precedence, what a truncated flow carries, which flows are
left alone byte for byte, streaming, limits per server and tool, and
recall (cut strings handed to the store, the recall server's answers left
whole)."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import re

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons, tflow

from obsmask_core.mitm.mcp_addon import METADATA_KEY
from obsmask_core.mitm.recall_addon import RECALL_METADATA
from obsmask_core.shared.recall_text import store_id
from obsmask_core.shared.truncation import TRUNCATION_MARK
from support.mcp_flows import (
    LONG,
    KeptStrings,
    McpAddons,
    mcp_flow,
    response_message,
    run_hooks,
)

# Configuration ------------------------------------------------------------------


def test_options_win_over_the_file_which_wins_over_the_defaults(context, toml_file):
    """The same precedence as conversation masking: defaults < mitm.toml <
    options set explicitly."""
    addon, tctx = context
    tctx.configure(addon.mcp, obsmask_config=toml_file(
        "[mcp_gateway.masking]\nmax_chars = 6000\nhead_chars = 1000\n"
        "[mcp_gateway]\ntimeout_seconds = 7\n"
        "[mcp_gateway.servers]\nfs = 'http://127.0.0.1:8004'\n"))
    assert (addon.limits.max_chars, addon.limits.head_chars, addon.limits.tail_chars) == (
        6000, 1000, 2000)
    assert addon.timeout == 7
    assert addon.servers["fs"].target == "/"  # "a bare base URL posts to /"
    tctx.configure(addon.mcp, mcpmask_head_chars=3000, mcpmask_gateway_timeout=9,
                   mcpmask_gateway_servers=["fs=http://127.0.0.1:9000/rpc"])
    assert addon.limits.head_chars == 3000 and addon.limits.max_chars == 6000
    assert addon.timeout == 9
    assert (addon.servers["fs"].port, addon.servers["fs"].target) == (9000, "/rpc")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mcpmask_max_chars": 3000}, "must not exceed max_chars (3000)"),
        ({"mcpmask_head_chars": -1}, "mcpmask_head_chars: must be 0 or more"),
        ({"mcpmask_marker_template": "{original_chars}"}, "needs some words"),
        ({"mcpmask_gateway_servers": ["fs"]}, "'fs' is not NAME=URL"),
        ({"mcpmask_gateway_timeout": 0}, "mcpmask_gateway_timeout: must be 1 or more"),
    ],
)
def test_invalid_options_are_refused(context, options, message):
    addon, tctx = context
    with pytest.raises(exceptions.OptionsError, match=message.replace("(", r"\(").replace(
            ")", r"\)")):
        tctx.configure(addon.mcp, **options)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[mcp_gateway.masking]\nmax_chars = 100\n", "must not exceed max_chars (100)"),
        ("[mcp_gateway.masking]\nmarker = 'x'\n", "[mcp_gateway.masking] marker: unknown key"),
        ("[mcp_gateway]\ntimeout = 3\n", "[mcp_gateway] timeout: unknown key"),
        ("[mcp_gateway]\ntimeout_seconds = 0\n", "timeout_seconds: must be 1 or more"),
        ("[mcp_gateway.servers]\n'a b' = 'http://127.0.0.1:1'\n", "a server name may hold"),
        ("[mcp_gateway.servers]\nfs = 8004\n", "fs: must be a URL string"),
    ],
)
def test_invalid_settings_files_are_refused_naming_the_file(context, toml_file, text, message):
    addon, tctx = context
    path = toml_file(text)
    with pytest.raises(exceptions.OptionsError) as refused:
        tctx.configure(addon.mcp, obsmask_config=path)
    assert message in str(refused.value) and path in str(refused.value)


# Buffered answers ---------------------------------------------------------------


def test_json_answer_is_cut_and_the_flow_tells_it(context, caplog):
    """A cut answer is visible: a comment, a mark, JSON-like metadata (strings
    cut, chars before and after, tokens saved), a log line per truncated
    message, and the original kept by flow.backup() when the body was
    buffered."""
    addon, _ = context
    flow = mcp_flow(response_message())
    with caplog.at_level(logging.INFO):
        run_hooks(addon, flow)
    text = json.loads(flow.response.content)["result"]["content"][0]["text"]
    assert text.startswith("HEAD" + "x" * 1996) and text.endswith("x" * 1996 + "TAIL")
    assert f"[{TRUNCATION_MARK} original_chars=20008 head=2000 tail=2000]" in text
    summary = flow.metadata[METADATA_KEY]
    assert summary["action"] == "truncated" and summary["transport"] == "json"
    assert summary["strings_cut"] == 1 and summary["messages_truncated"] == 1
    assert summary["chars_before"] == 20_008 and summary["chars_after"] == len(text)
    assert "tokens_saved" in summary
    json.dumps(summary)  # JSON-like, so `mitmdump -w` keeps it
    assert flow.marked and "cut 1 long string(s)" in flow.comment
    assert [r.getMessage() for r in caplog.records if "MCP response id=3" in r.getMessage()]
    flow.revert()
    assert flow.response.content == response_message()


def test_compressed_answer_is_cut_and_compressed_again(context):
    addon, _ = context
    flow = mcp_flow(gzip.compress(response_message()))
    flow.response.headers["content-encoding"] = "gzip"
    run_hooks(addon, flow)
    assert flow.response.headers["content-encoding"] == "gzip"
    assert TRUNCATION_MARK.encode() in gzip.decompress(flow.response.raw_content)


@pytest.mark.parametrize(
    ("answer", "request_body"),
    [
        # Not MCP: a JSON answer to a non-JSON-RPC request.
        (json.dumps({"text": LONG}).encode(), b'{"model": "x"}'),
        # Short strings only: nothing to cut.
        (response_message("short"), b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call"}'),
        # A JSON-RPC *request* travelling in an answer is not cut.
        (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage",
                     "params": {"text": LONG}}).encode(),
         b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call"}'),
        # Broken JSON from an MCP server.
        (response_message()[:-1], b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call"}'),
    ],
    ids=["not-mcp", "nothing-long", "request-in-answer", "broken-json"],
)
def test_answers_that_are_not_cut_stay_byte_for_byte(context, answer, request_body):
    """Only MCP flows are touched, and a body that is not a JSON-RPC response
    with something to cut passes byte for byte."""
    addon, _ = context
    flow = mcp_flow(answer, request_body=request_body)
    before = flow.response.raw_content
    run_hooks(addon, flow)
    assert flow.response.raw_content is before
    assert not flow.marked


def test_a_broken_json_answer_is_logged_once_and_a_text_202_not_at_all(context, caplog):
    """"A body obsmask cannot understand passes through byte for byte, with one
    clear log line saying why"; the legacy transport's 202 "Accepted" to a
    POST is not an answer to read, and logs nothing."""
    addon, _ = context
    broken = mcp_flow(response_message()[:-1])
    accepted = mcp_flow(b"Accepted", content_type="text/plain")
    with caplog.at_level(logging.WARNING):
        run_hooks(addon, broken)
        run_hooks(addon, accepted)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "forwarded unchanged: not valid JSON" in lines[0]
    assert accepted.response.raw_content == b"Accepted"


def test_disabled_leaves_mcp_answers_alone(context):
    addon, tctx = context
    tctx.configure(addon.mcp, mcpmask_enabled=False)
    flow = mcp_flow(response_message())
    run_hooks(addon, flow)
    assert flow.response.raw_content == response_message()


# Streams ------------------------------------------------------------------------


def sse(message: bytes) -> bytes:
    return b"event: message\r\nid: 1\r\ndata: " + message + b"\r\n\r\n"


def test_event_stream_is_rewritten_while_it_streams(context):
    """A text/event-stream answer is rewritten while it streams, event by
    event; mitmproxy's stream callable must never return b"" in the middle
    of a body (it would end a chunked body)."""
    addon, _ = context
    flow = mcp_flow(b"", content_type="text/event-stream")
    flow.response.stream = False
    flow.response.raw_content = None  # as at responseheaders: the body is still to come
    asyncio.run(addon.request(flow))
    addon.responseheaders(flow)
    assert callable(flow.response.stream)
    stream = b": ping\r\n\r\n" + sse(response_message())
    out: list[bytes] = []
    for start in range(0, len(stream), 1000):
        pieces = flow.response.stream(stream[start : start + 1000])
        assert isinstance(pieces, list) and b"" not in pieces
        out.extend(pieces)
    out.extend(flow.response.stream(b""))
    joined = b"".join(out)
    assert joined.startswith(b": ping\r\n\r\nevent: message\r\nid: 1\r\ndata: ")
    assert TRUNCATION_MARK.encode() in joined and len(joined) < 5000
    assert flow.metadata[METADATA_KEY]["transport"] == "sse"


def test_compressed_event_stream_goes_out_decoded(context):
    addon, _ = context
    flow = mcp_flow(b"", content_type="text/event-stream")
    flow.response.headers["content-encoding"] = "gzip"
    flow.response.stream = False
    flow.response.raw_content = None  # as at responseheaders: the body is still to come
    asyncio.run(addon.request(flow))
    addon.responseheaders(flow)
    assert "content-encoding" not in flow.response.headers
    compressed = gzip.compress(sse(response_message()))
    joined = b"".join(flow.response.stream(compressed) + flow.response.stream(b""))
    assert joined.startswith(b"event: message") and TRUNCATION_MARK.encode() in joined


def test_disabled_still_streams_mcp_event_streams_unchanged(context):
    """With truncation off an MCP stream passes as it comes: held whole by
    mitmproxy, a GET stream that never ends would never reach the client."""
    addon, tctx = context
    tctx.configure(addon.mcp, mcpmask_enabled=False)
    flow = mcp_flow(b"", content_type="text/event-stream", method="GET", request_body=b"")
    flow.response.stream = False
    flow.response.raw_content = None  # as at responseheaders: the body is still to come
    addon.responseheaders(flow)
    assert flow.response.stream is True


def test_a_whole_event_stream_body_is_cut_in_the_response_hook(context):
    """The gateway's answers are whole bodies made in the request hook: not
    streamed (no stream callable would ever see them), cut as a buffer."""
    addon, _ = context
    flow = mcp_flow(sse(response_message()), content_type="text/event-stream")
    asyncio.run(addon.request(flow))
    addon.responseheaders(flow)
    assert not flow.response.stream
    addon.response(flow)
    assert TRUNCATION_MARK.encode() in flow.response.content
    assert flow.response.content.startswith(b"event: message\r\nid: 1\r\ndata: ")


def test_a_compressed_get_stream_is_taken_only_when_it_is_mcp(context):
    """Any GET event stream may carry MCP (the legacy transport sends no MCP
    header), but decoding a compressed one of some other site would change
    its headers for nothing."""
    addon, _ = context
    for headers, taken in (({}, False), ({"mcp-session-id": "s1"}, True)):
        flow = mcp_flow(b"", content_type="text/event-stream", method="GET", request_body=b"")
        flow.request.headers.update(headers)
        flow.response.headers["content-encoding"] = "gzip"
        flow.response.stream = False
        flow.response.raw_content = None
        addon.responseheaders(flow)
        assert callable(flow.response.stream) is taken
        assert ("content-encoding" in flow.response.headers) is not taken


def test_event_stream_of_a_non_mcp_post_is_not_taken(context):
    """An LLM provider's stream (a POST that is not JSON-RPC) is not MCP."""
    addon, _ = context
    flow = mcp_flow(b"", content_type="text/event-stream", request_body=b'{"model": "m"}')
    flow.response.stream = False
    flow.response.raw_content = None  # as at responseheaders: the body is still to come
    asyncio.run(addon.request(flow))
    addon.responseheaders(flow)
    assert flow.response.stream is False


# Robustness ---------------------------------------------------------------------


def test_hooks_never_raise_into_mitmproxy(context, caplog, monkeypatch):
    """The addon never raises into mitmproxy: a bug is logged, the body goes on."""
    addon, _ = context

    def broken(*_args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("obsmask_core.mitm.mcp_cuts.truncate_jsonrpc_body", broken)
    flow = mcp_flow(response_message())
    with caplog.at_level(logging.ERROR):
        run_hooks(addon, flow)
    assert flow.response.raw_content == response_message()
    assert any("internal error" in r.getMessage() for r in caplog.records)


def test_a_cut_stream_announces_no_length(context):
    """An SSE answer sent with Content-Length gets shorter when an event is
    cut: the header must go, or the client waits for bytes that never come."""
    addon, _ = context
    flow = mcp_flow(b"", content_type="text/event-stream")
    flow.response.headers["content-length"] = "20160"
    flow.response.stream = False
    flow.response.raw_content = None
    asyncio.run(addon.request(flow))
    addon.responseheaders(flow)
    assert callable(flow.response.stream) and "content-length" not in flow.response.headers


def test_a_stream_that_fails_mid_way_goes_on_decoded(context, monkeypatch):
    """After an internal error the rest of a gzip stream still goes out
    decoded (its Content-Encoding is already gone), never as compressed bytes."""
    addon, _ = context
    flow = mcp_flow(b"", content_type="text/event-stream")
    flow.response.headers["content-encoding"] = "gzip"
    flow.response.stream = False
    flow.response.raw_content = None
    asyncio.run(addon.request(flow))
    addon.responseheaders(flow)

    def broken(*_args: object) -> list[bytes]:
        raise RuntimeError("boom")

    monkeypatch.setattr("obsmask_core.mcp.sse_rewrite.SseTruncator._rewritten", broken)
    plain = b": ping\n\n" + sse(response_message()) + b": after\n\n"
    compressed = gzip.compress(plain)
    out = [piece for start in range(0, len(compressed), 512)
           for piece in flow.response.stream(compressed[start : start + 512])]
    out += flow.response.stream(b"")
    assert b"".join(out) == plain


# Limits per server and tool -------------------------------------------------------


def tool_call(message_id: int, name: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": message_id, "method": "tools/call",
            "params": {"name": name, "arguments": {}}}


def gateway_flow(server: str, request: object, answer: bytes,
                 content_type: str = "application/json") -> tflow.HTTPFlow:
    """A flow as the gateway hands it on once routed to the relay: its
    metadata names the server (the flow already has its answer, so the
    gateway addon leaves it be)."""
    flow = mcp_flow(answer, content_type=content_type, request_body=json.dumps(request).encode(),
                    path=f"/api/mcp-gateway/{server}/rpc")
    flow.metadata[METADATA_KEY] = {"gateway_server": server}
    return flow


def cut_text(flow: tflow.HTTPFlow, index: int = 0) -> str:
    answer = json.loads(flow.response.content)
    message = answer[index] if isinstance(answer, list) else answer
    return message["result"]["content"][0]["text"]


def test_a_gateway_servers_tool_is_cut_at_its_own_limit_and_other_tools_at_the_default(context):
    """With the rule fs/read_* -> 10000, a read_file answer of the gateway's
    server fs keeps 5000 + 5000 characters of a 20,008-character string,
    while a search answer of the same batch, and read_file on another
    server, are cut at max_chars (2000 + 2000)."""
    addon, tctx = context
    tctx.configure(addon.mcp, mcpmask_max_chars_for=["fs/read_*|10000"])
    answers = b"[" + response_message(message_id=1) + b"," + response_message(message_id=2) + b"]"
    flow = gateway_flow("fs", [tool_call(1, "read_file"), tool_call(2, "search")], answers)
    run_hooks(addon, flow)
    read, search = cut_text(flow, 0), cut_text(flow, 1)
    assert read == LONG[:5000] + (f"\n... [{TRUNCATION_MARK} original_chars=20008 head=5000 "
                                  "tail=5000] ...\n") + LONG[-5000:]
    assert f"[{TRUNCATION_MARK} original_chars=20008 head=2000 tail=2000]" in search
    assert len(search) < 4100
    # A tool's name is the client's text: it is read from the request, never
    # left on the flow.
    assert "tools" not in flow.metadata[METADATA_KEY]
    other = gateway_flow("db", [tool_call(1, "read_file")], response_message(message_id=1))
    run_hooks(addon, other)
    assert "head=2000 tail=2000]" in cut_text(other)


def test_a_rule_of_zero_from_the_settings_file_never_cuts_that_tool(context, toml_file):
    addon, tctx = context
    tctx.configure(addon.mcp, obsmask_config=toml_file(
        '[mcp_gateway.masking]\nmax_chars_for = [["fs/search", "0"], ["*/*", "6000"]]\n'))
    assert [(rule.server, rule.tool, rule.max_chars) for rule in addon.tool_limits.rules] == [
        ("fs", "search", 0), ("*", "*", 6000)]
    flow = gateway_flow("fs", tool_call(3, "search"), response_message())
    run_hooks(addon, flow)
    assert flow.response.content == response_message() and not flow.marked
    other = gateway_flow("fs", tool_call(3, "read_file"), response_message())
    run_hooks(addon, other)
    assert "head=3000 tail=3000]" in cut_text(other)


def test_outside_the_gateway_a_rule_names_the_servers_host(context):
    addon, tctx = context
    tctx.configure(addon.mcp, mcpmask_max_chars_for=["tools.example.com/*|30000"])
    flow = mcp_flow(response_message(), request_body=json.dumps(tool_call(3, "x")).encode())
    flow.request.host = "tools.example.com"
    run_hooks(addon, flow)
    assert flow.response.content == response_message()
    elsewhere = mcp_flow(response_message())
    run_hooks(addon, elsewhere)
    assert TRUNCATION_MARK in cut_text(elsewhere)


@pytest.mark.parametrize(
    ("value", "message"),
    [(["fs/|100"], "mcpmask_max_chars_for: 'fs/'"),
     (["fs/read|-1"], "'-1' is not a number of characters"),
     (["fs/read"], "mcpmask_max_chars_for: must be an array of")],
)
def test_a_bad_limit_rule_is_refused_naming_the_option(context, value, message):
    addon, tctx = context
    with pytest.raises(exceptions.OptionsError, match=re.escape(message)):
        tctx.configure(addon.mcp, mcpmask_max_chars_for=value)


def test_a_bad_limit_rule_in_the_file_names_the_file_and_key(context, toml_file):
    addon, tctx = context
    path = toml_file('[mcp_gateway.masking]\nmax_chars_for = [["fs/read", "ten"]]\n')
    with pytest.raises(exceptions.OptionsError) as refused:
        tctx.configure(addon.mcp, obsmask_config=path)
    assert "max_chars_for" in str(refused.value) and path in str(refused.value)


def tools_list_answer(*tools: tuple[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
        {"name": name, "inputSchema": {"type": "object"},
         "_meta": {"anthropic/maxResultSizeChars": ceiling}} for name, ceiling in tools]}}).encode()


def test_a_tools_list_ceiling_raises_that_tools_limit_on_that_server(context):
    """A server that declares _meta["anthropic/maxResultSizeChars"] = 30000
    for read_file in its tools/list answer gets its read_file answers of
    20,008 characters whole; a tool it declares smaller, and the same tool
    on another server, are still cut at max_chars."""
    addon, _ = context
    listed = gateway_flow("fs", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                          tools_list_answer(("read_file", 30_000), ("search", 100)))
    run_hooks(addon, listed)
    read = gateway_flow("fs", tool_call(3, "read_file"), response_message())
    run_hooks(addon, read)
    assert read.response.content == response_message() and not read.marked
    search = gateway_flow("fs", tool_call(3, "search"), response_message())
    run_hooks(addon, search)
    assert "head=2000 tail=2000]" in cut_text(search)
    elsewhere = gateway_flow("db", tool_call(3, "read_file"), response_message())
    run_hooks(addon, elsewhere)
    assert "head=2000 tail=2000]" in cut_text(elsewhere)


@pytest.mark.parametrize("listed_again", [
    tools_list_answer(("read_file", None)),  # a _meta with no valid ceiling
    json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
        {"name": "read_file", "inputSchema": {"type": "object"}}]}}).encode(),  # no _meta
])
def test_a_later_tools_list_without_the_ceiling_takes_it_back(context, listed_again):
    """A server that lists a tool again without its ceiling no longer has
    one: the tool's answers are cut at max_chars again."""
    addon, _ = context
    for answer in (tools_list_answer(("read_file", 30_000)), listed_again):
        run_hooks(addon, gateway_flow("fs", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                      answer))
    read = gateway_flow("fs", tool_call(3, "read_file"), response_message())
    run_hooks(addon, read)
    assert "head=2000 tail=2000]" in cut_text(read)


def test_a_tools_list_ceiling_sent_on_an_event_stream_counts_too(context):
    """MCP servers answer a POST with an event stream by default: the
    tools/list answer read there declares the ceiling as well (capped at
    500,000, so a 20,008-character answer is kept whole)."""
    addon, _ = context
    listed = gateway_flow("fs", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, b"",
                          content_type="text/event-stream")
    assert streamed_answer(addon, listed, sse(tools_list_answer(("read_file", 10**9))))
    assert addon.ceilings.get("gateway/fs", "read_file") == 500_000
    read = gateway_flow("fs", tool_call(3, "read_file"), b"", content_type="text/event-stream")
    assert streamed_answer(addon, read, sse(response_message())) == sse(response_message())


def test_a_legacy_stream_response_gets_the_limit_of_the_tool_its_post_called(context):
    """The legacy transport answers a POST on the GET stream: the response
    gets the limit of the tool that POST called, found by its id among the
    recent requests to the same server; a response to an id no request
    used gets max_chars."""
    addon, tctx = context
    tctx.configure(addon.mcp, mcpmask_max_chars_for=["*/read_file|30000"])
    posted = mcp_flow(b"Accepted", content_type="text/plain", path="/messages/",
                      request_body=json.dumps(tool_call(41, "read_file")).encode())
    run_hooks(addon, posted)
    flow = mcp_flow(b"", content_type="text/event-stream", method="GET", request_body=b"",
                    path="/sse")
    out = streamed_answer(addon, flow, sse(response_message(message_id=41))
                          + sse(response_message(message_id=42)))
    first, second = out.split(b"\r\n\r\n")[:2]
    assert TRUNCATION_MARK.encode() not in first
    assert b"head=2000 tail=2000]" in second


# Recall --------------------------------------------------------------------------


@pytest.fixture
def recall_context(toml_file):
    """The addons with a recall addon that keeps what it is handed."""
    kept = KeptStrings()
    addons = McpAddons(recall=kept)
    with taddons.context(addons.settings, addons.gateway, addons.mcp) as tctx:
        tctx.configure(addons.mcp, obsmask_config=toml_file(""))
        yield addons, kept


def streamed_answer(addon, flow, stream: bytes) -> bytes:
    """What the client gets when the answer streams, in chunks of 1000 bytes."""
    flow.response.stream = False
    flow.response.raw_content = None  # as at responseheaders: the body is still to come
    asyncio.run(addon.request(flow))
    addon.responseheaders(flow)
    assert callable(flow.response.stream)
    out = [piece for start in range(0, len(stream), 1000)
           for piece in flow.response.stream(stream[start : start + 1000])]
    return b"".join(out + flow.response.stream(b""))


def test_with_recall_a_cut_json_answer_hands_the_whole_string_to_the_store(recall_context):
    addon, kept = recall_context
    flow = mcp_flow(response_message())
    run_hooks(addon, flow)
    recall_id = store_id(LONG)
    assert kept.kept == [(recall_id, LONG)]
    assert cut_text(flow) == LONG[:2000] + (
        f"\n... [{TRUNCATION_MARK} original_chars=20008 head=2000 tail=2000; recall "
        f"id={recall_id}] ...\n") + LONG[-2000:]
    assert flow.metadata[METADATA_KEY]["recall_ids"] == [recall_id]


def test_with_recall_a_cut_event_stream_hands_the_whole_string_to_the_store(recall_context):
    addon, kept = recall_context
    other = LONG.replace("HEAD", "OTHR")
    flow = mcp_flow(b"", content_type="text/event-stream")
    out = streamed_answer(addon, flow, sse(response_message()) + sse(response_message(other)))
    assert kept.kept == [(store_id(LONG), LONG), (store_id(other), other)]
    assert f"; recall id={store_id(LONG)}] ...".encode() in out
    assert flow.metadata[METADATA_KEY]["recall_ids"] == [store_id(LONG), store_id(other)]


def test_with_recall_off_nothing_is_kept_and_the_marker_is_plain(recall_context):
    addon, kept = recall_context
    kept.enabled = False
    flow = mcp_flow(response_message())
    run_hooks(addon, flow)
    assert kept.kept == [] and "recall_ids" not in flow.metadata[METADATA_KEY]
    assert f"[{TRUNCATION_MARK} original_chars=20008 head=2000 tail=2000]" in cut_text(flow)


def test_an_answer_of_the_recall_server_is_never_cut(recall_context):
    """The recall server answers with the text the model asked for: MCP
    truncation leaves it whole, buffered or streamed."""
    addon, kept = recall_context
    flow = mcp_flow(response_message())
    flow.request.headers["mcp-session-id"] = "s1"  # MCP by every other sign
    flow.metadata[RECALL_METADATA] = {"recall_id": "cut-0123456789abcdef"}
    run_hooks(addon, flow)
    assert flow.response.content == response_message() and not flow.marked
    stream = mcp_flow(b"", content_type="text/event-stream")
    stream.request.headers["mcp-session-id"] = "s1"
    stream.metadata[RECALL_METADATA] = {}
    stream.response.stream = False
    stream.response.raw_content = None
    asyncio.run(addon.request(stream))
    addon.responseheaders(stream)
    assert stream.response.stream is False
    stream.response.raw_content = sse(response_message())
    addon.response(stream)
    assert stream.response.raw_content == sse(response_message())
    assert kept.kept == [] and METADATA_KEY not in flow.metadata
