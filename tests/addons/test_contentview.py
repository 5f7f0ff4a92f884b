"""obsmask's content view inside mitmproxy's test context, on the installed
major (mitmproxy 11 or 12; CI runs this file on both): flows masked,
clipped and cut by the real addons, rendered through mitmproxy's own
content view machinery, with the view "auto" chooses and by name; the
other messages never get it; a failure is a short text and a traceback in
the log; the view goes when obsmask is done. A long request or answer is
diffed one changed item or message at a time: its work stays small."""

from __future__ import annotations

import gzip
import io
import json
import logging

import pytest
from mitmproxy import contentviews
from mitmproxy import io as flow_io
from mitmproxy.test import taddons, tflow, tutils

from obsmask_core.mitm import contentview
from obsmask_core.mitm.addons import obsmask_addons
from obsmask_core.mitm.contentview import NAME, MaskingView
from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.mcp_addon import McpTruncation
from obsmask_core.mitm.recall_addon import Recall
from obsmask_core.shared.truncation import TRUNCATION_MARK
from obsmask_core.shared.view_text import DIFF_WORK
from support.chat import LONG_OUTPUT
from support.formats import FORMAT_IDS, FORMATS, Call, Result, Say, Turn, convert, session
from support.mcp_flows import LONG, mcp_flow, response_message

NEW_API = hasattr(contentviews, "Contentview")
PATHS = {"chat": "/v1/chat/completions", "anthropic": "/v1/messages",
         "responses": "/v1/responses"}
PLACEHOLDER = "[Observation masquée: résultat d'outil ancien (tool_call_id=call_0_0"



def render(flow, message, view: str = "auto") -> tuple[str, str]:
    """(which view mitmproxy chose, the text it shows), through mitmproxy's
    own machinery: prettify_message (12) or get_message_content_view (11,
    whose description names the view)."""
    if NEW_API:
        result = contentviews.prettify_message(message, flow, view_name=view)
        return str(result.view_name).lower(), result.text
    description, lines, error = contentviews.get_message_content_view(view, message, flow)
    assert error is None, error
    text = "\n".join("".join(str(part) for _style, part in line) for line in lines)
    # "[decoded gzip] obsmask: masked request": the view's description
    return (NAME if "obsmask: " in description else description.lower()), text


@pytest.fixture
def obsmask(toml_file):
    """All of obsmask's addons, as obsmask.py loads them, in a test context."""
    addons = obsmask_addons()
    with taddons.context(*addons) as tctx:
        conversation = next(a for a in addons if isinstance(a, ConversationMasking))
        tctx.configure(conversation, obsmask_config=toml_file(""), obsmask_window_turns=1)
        yield addons, tctx
        for addon in addons:
            if isinstance(addon, MaskingView | Recall):
                addon.done()


def addon_of(addons, kind):
    return next(a for a in addons if isinstance(a, kind))


def conversation_flow(fmt, turns: int = 4, encoding: str | None = None) -> tflow.HTTPFlow:
    body = json.dumps({"model": "m", fmt.list_member: convert(fmt, session(turns))}).encode()
    request = tutils.treq(method=b"POST", path=PATHS[fmt.name].encode(), content=b"")
    request.headers["content-type"] = "application/json"
    if encoding:
        request.headers["content-encoding"] = encoding
        body = gzip.compress(body)
    request.raw_content = body
    request.headers["content-length"] = str(len(body))
    flow = tflow.tflow(req=request, resp=True)
    flow.response.headers["content-type"] = "application/json"
    return flow


def masked_flow(addons, fmt, **kwargs) -> tflow.HTTPFlow:
    flow = conversation_flow(fmt, **kwargs)
    addon_of(addons, ConversationMasking).request(flow)
    assert flow.metadata["obsmask"]["action"] == "masked"
    return flow


def test_obsmask_loads_the_view_with_its_addons():
    assert any(isinstance(addon, MaskingView) for addon in obsmask_addons())


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_auto_shows_a_masked_request_with_its_results_and_the_diff(obsmask, fmt):
    addons, _ = obsmask
    flow = masked_flow(addons, fmt)
    chosen, text = render(flow, flow.request)
    assert chosen == NAME
    assert text.startswith("obsmask: masked request")
    assert "masked 3, clipped 0 of 4 tool results; stage masking" in text
    for call_id in ("call_0_0", "call_1_0", "call_2_0"):
        assert f"masked  {call_id}  bash  " in text
    assert "  in_window (1): inside the window" in text and "    call_3_0" in text
    assert "reasons are not available" not in text
    lines = text.splitlines()
    assert any(line.startswith("-") and "line 59: some ordinary tool output" in line
               for line in lines)
    assert any(line.startswith("+") and PLACEHOLDER in line for line in lines)
    assert any(line.startswith("  obsmask: masked 3 of 4 tool results") for line in lines)
    assert render(flow, flow.request, NAME) == (NAME, text)


def test_clipped_results_are_shown_clipped(obsmask):
    addons, tctx = obsmask
    tctx.configure(addon_of(addons, ConversationMasking), obsmask_max_input_tokens=300,
                   obsmask_clip_head_chars=100, obsmask_clip_tail_chars=100)
    flow = masked_flow(addons, FORMATS[0])
    chosen, text = render(flow, flow.request)
    assert chosen == NAME
    assert "clipped 1 of 4 tool results; stage clipping" in text
    assert f"clipped  call_3_0  bash  {len(LONG_OUTPUT) + 11:,} -> " in text
    assert any(line.startswith("+") and TRUNCATION_MARK in line for line in text.splitlines())


def test_a_compressed_request_is_compared_decoded(obsmask):
    addons, _ = obsmask
    flow = masked_flow(addons, FORMATS[1], encoding="gzip")
    chosen, text = render(flow, flow.request)
    assert chosen == NAME and "masked 3, clipped 0" in text and PLACEHOLDER in text


def test_settings_changed_since_leave_the_diff_and_say_the_reasons_are_gone(obsmask):
    addons, tctx = obsmask
    flow = masked_flow(addons, FORMATS[2])
    tctx.configure(addon_of(addons, ConversationMasking), obsmask_window_turns=3)
    _, text = render(flow, flow.request)
    assert "masked  call_0_0" in text
    assert "the reasons are not available: planned again with the settings in force" in text


def test_a_masked_flow_read_back_from_a_file_is_shown_alike(obsmask):
    """mitmproxy saves the backup and the metadata with the flow: a flow
    file written with -w shows the same page."""
    addons, _ = obsmask
    flow = masked_flow(addons, FORMATS[0])
    buffer = io.BytesIO()
    flow_io.FlowWriter(buffer).add(flow)
    buffer.seek(0)
    (loaded,) = list(flow_io.FlowReader(buffer).stream())
    assert render(loaded, loaded.request) == render(flow, flow.request)


def test_every_other_message_keeps_its_usual_view(obsmask):
    """The answer of a masked request, a request with nothing to mask and a
    request off the routes get mitmproxy's own view; asked by name, the
    view says obsmask did not change them."""
    addons, _ = obsmask
    flow = masked_flow(addons, FORMATS[0])
    flow.response.content = b'{"choices": []}'
    unchanged = conversation_flow(FORMATS[0], turns=1)
    addon_of(addons, ConversationMasking).request(unchanged)
    assert unchanged.metadata["obsmask"]["action"] == "unchanged"
    elsewhere = tflow.tflow(resp=True)
    elsewhere.request.headers["content-type"] = "application/json"
    elsewhere.request.content = b'{"a": 1}'
    for message in (flow.response, unchanged.request, elsewhere.request):
        owner = next(f for f in (flow, unchanged, elsewhere)
                     if message in (f.request, f.response))
        chosen, _ = render(owner, message)
        assert chosen != NAME
        chosen, text = render(owner, message, NAME)
        assert chosen == NAME
        assert text.startswith("obsmask: this message was not masked or cut by obsmask")


def test_a_cut_mcp_answer_lists_each_string_and_the_diff(obsmask):
    addons, _ = obsmask
    mcp = addon_of(addons, McpTruncation)
    flow = mcp_flow(response_message())
    mcp.request(flow)
    mcp.response(flow)
    assert flow.metadata["obsmask_mcp"]["action"] == "truncated"
    chosen, text = render(flow, flow.response)
    assert chosen == NAME
    assert text.startswith("obsmask: cut MCP answer (JSON)")
    assert f"1 string(s) cut in 1 response(s): {len(LONG):,} -> " in text
    went_out = json.loads(flow.response.content)["result"]["content"][0]["text"]
    row = next(line for line in text.splitlines() if line.startswith("  id 3"))
    assert row.split("  ")[1:] == ["id 3", "result.content[0].text",
                                   f"{len(LONG):,} -> {len(went_out):,} chars", "no recall id"]
    lines = text.splitlines()
    assert any(line.startswith("-") and "HEADxxxx" in line and TRUNCATION_MARK not in line
               for line in lines)
    assert any(line.startswith("+") and TRUNCATION_MARK in line for line in lines)
    assert render(flow, flow.request)[0] != NAME  # its request: not changed


def test_a_cut_event_stream_answer_names_its_event(obsmask):
    addons, _ = obsmask
    mcp = addon_of(addons, McpTruncation)
    stream = b"event: message\r\nid: 1\r\ndata: " + response_message() + b"\r\n\r\n"
    flow = mcp_flow(stream, content_type="text/event-stream")
    mcp.request(flow)
    mcp.responseheaders(flow)
    mcp.response(flow)
    chosen, text = render(flow, flow.response)
    assert chosen == NAME and "(event stream)" in text
    assert "event 1 id 3  result.content[0].text" in text


def test_a_streamed_cut_answer_is_told_on_its_request(obsmask):
    """mitmproxy keeps no body of a streamed answer (and shows no view for
    it): the request's page says what was cut and that nothing more can be
    shown."""
    addons, _ = obsmask
    mcp = addon_of(addons, McpTruncation)
    flow = mcp_flow(b"", content_type="text/event-stream")
    flow.response.stream = False
    flow.response.raw_content = None  # as at responseheaders: the body is still to come
    flow.request.headers["content-type"] = "application/json"
    mcp.request(flow)
    mcp.responseheaders(flow)
    stream = b"data: " + response_message() + b"\n\n"
    flow.response.stream(stream)
    flow.response.stream(b"")
    assert flow.metadata["obsmask_mcp"]["transport"] == "sse"
    chosen, text = render(flow, flow.request)
    assert chosen == NAME
    assert text.startswith("obsmask: the MCP answer to this request was cut as it streamed")
    assert "mitmproxy keeps no body of a streamed answer" in text
    assert '"method": "tools/call"' in text


def test_a_failure_is_a_short_text_and_its_traceback_goes_to_the_log(obsmask, monkeypatch,
                                                                     caplog):
    addons, _ = obsmask
    flow = masked_flow(addons, FORMATS[0])

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(contentview, "explain_masking", broken)
    with caplog.at_level(logging.ERROR):
        chosen, text = render(flow, flow.request)
    assert chosen == NAME
    assert text == ("obsmask: this view failed (RuntimeError); the traceback is in mitmproxy's "
                    "event log")
    assert "the content view failed on POST /v1/chat/completions" in caplog.text
    assert "RuntimeError: boom" in caplog.text


def test_a_failing_priority_gives_way(obsmask, monkeypatch, caplog):
    addons, _ = obsmask
    flow = masked_flow(addons, FORMATS[0])

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(contentview, "page_kind", broken)
    with caplog.at_level(logging.ERROR):
        chosen, _ = render(flow, flow.request)
    assert chosen != NAME and "render priority failed" in caplog.text


def test_the_view_goes_when_obsmask_is_done(obsmask):
    addons, _ = obsmask
    flow = masked_flow(addons, FORMATS[0])
    view = addon_of(addons, MaskingView)
    view.done()
    assert render(flow, flow.request)[0] != NAME
    if NEW_API:  # mitmproxy 12 cannot remove a view: it stays, inert
        assert render(flow, flow.request, NAME)[1] == "obsmask: obsmask is no longer loaded"
    else:
        assert contentviews.get(NAME) is None
    view.load(None)  # a reloaded script adds it again
    assert render(flow, flow.request)[0] == NAME
    view.load(None)  # and never twice
    assert render(flow, flow.request)[0] == NAME


def test_a_thousand_masked_results_render_with_one_small_diff_per_item(obsmask, compared):
    """mitmweb and mitmdump render the view on mitmproxy's event loop: a
    request of 1,000 results is compared item by item (999 masked: 999
    comparisons of a few lines each, never the whole body at once)."""
    addons, _ = obsmask
    flow = masked_flow(addons, FORMATS[0], turns=1_000)
    compared.clear()
    chosen, text = render(flow, flow.request)
    assert chosen == NAME
    assert "masked 999, clipped 0 of 1000 tool results; stage masking" in text
    assert compared == [(5, 5)] * 999 and sum(a * b for a, b in compared) < DIFF_WORK / 100
    hunks = [line for line in text.splitlines() if line.startswith("@@")]
    assert hunks == [f"@@ messages[{2 * turn + 2}] (call_{turn}_0) @@" for turn in range(999)]


def test_a_cut_answer_of_three_thousand_messages_renders_with_one_small_diff_per_message(
        obsmask, compared):
    addons, tctx = obsmask
    mcp = addon_of(addons, McpTruncation)
    tctx.configure(mcp, mcpmask_max_chars=100, mcpmask_head_chars=20, mcpmask_tail_chars=20)
    batch = [json.loads(response_message(f"HEAD{n}" + "x" * 200, n)) for n in range(3_000)]
    flow = mcp_flow(json.dumps(batch).encode(), request_body=json.dumps(
        [{"jsonrpc": "2.0", "id": n, "method": "tools/call"} for n in range(3_000)]).encode())
    mcp.request(flow)
    mcp.response(flow)
    assert flow.metadata["obsmask_mcp"]["strings_cut"] == 3_000
    compared.clear()
    chosen, text = render(flow, flow.response)
    assert chosen == NAME and "Cut strings (3000):" in text
    assert len(compared) == 3_000 and all(max(sides) < 20 for sides in compared)
    assert sum(a * b for a, b in compared) < DIFF_WORK / 4
    hunks = [line for line in text.splitlines() if line.startswith("@@")]
    assert hunks == [f"@@ message {n + 1} of 3000 (id {n}) @@" for n in range(3_000)]


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_a_refetch_is_shown_with_the_call_it_repeats(obsmask, fmt):
    """The model reads a.py again once the window of one turn has masked
    its first read: the page names the re-fetch, its tool and the call it
    repeats, and the flow's comment names it too."""
    addons, _ = obsmask
    events = [Say("user", "Fix the bug.")]
    for call_id, path in (("r1", "a.py"), ("r2", "b.py"), ("r3", "c.py"), ("r4", "a.py")):
        events += [Turn([Call(call_id, "read_file", {"path": path})]),
                   Result(call_id, f"{LONG_OUTPUT}\n({path})")]
    flow = conversation_flow(fmt)
    flow.request.content = json.dumps({"model": "m",
                                       fmt.list_member: convert(fmt, events)}).encode()
    addon_of(addons, ConversationMasking).request(flow)
    chosen, text = render(flow, flow.request)
    assert chosen == NAME
    lines = text.splitlines()
    assert "  r4  read_file  repeats r1 (tool turn 1)" in lines
    assert any(line.startswith("  obsmask: re-fetch of a masked result: r4; ") for line in lines)
