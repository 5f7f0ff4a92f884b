"""Big MCP answers cut on a worker thread (``mitm/mcp_addon.py`` with
``mitm/off_loop.py``), in mitmproxy's test context: with an event loop
running, the response hook returns an awaitable only for an answer of
OFF_LOOP_BYTES or more (a compressed one judged by its decoded size),
which mitmproxy awaits while the loop serves the other flows; the flow then
carries exactly what an inline cut gives it, and a failure on the worker
leaves it as it came. Also the gateway's flows ask the relay to keep
mitmproxy's connection."""

from __future__ import annotations

import asyncio
import base64
import gc
import gzip
import json
import logging
import random
import threading

import pytest
from mitmproxy import http
from mitmproxy.test import tflow

from obsmask_core.mitm import mcp_cuts
from obsmask_core.mitm.mcp_addon import METADATA_KEY
from obsmask_core.mitm.off_loop import DECODED_PER_ENCODED_BYTE, OFF_LOOP_BYTES
from obsmask_core.shared.truncation import TRUNCATION_MARK
from support.mcp_flows import McpAddons, mcp_flow, response_message

BIG = "HEAD" + "é" * (OFF_LOOP_BYTES // 2) + "TAIL"  # 2 bytes a character


def requested(addon: McpAddons, flow: tflow.HTTPFlow) -> tflow.HTTPFlow:
    """The flow after its request hooks (which tell it MCP)."""
    asyncio.run(addon.request(flow))
    return flow


def big_flow(addon: McpAddons, content_type: str = "application/json") -> tflow.HTTPFlow:
    message = response_message(BIG)
    body = message if content_type == "application/json" else (
        b"event: message\ndata: " + message + b"\n\n")
    return requested(addon, mcp_flow(body, content_type=content_type))


def respond_in_loop(addon: McpAddons, flow: http.HTTPFlow) -> bool:
    """The response hook as mitmproxy calls it, with its event loop running
    (and what it returns awaited); whether it returned an awaitable."""
    async def respond() -> bool:
        pending = addon.mcp.response(flow)
        if pending is None:
            return False
        await pending
        return True

    return asyncio.run(respond())


def outcome(flow: http.HTTPFlow) -> tuple[bytes | None, list[tuple[str, str]], object, str]:
    assert flow.response is not None
    return (flow.response.raw_content, list(flow.response.headers.items(multi=True)),
            flow.metadata.get(METADATA_KEY), flow.comment)


@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
def test_a_big_answer_is_cut_on_a_worker_thread_like_it_is_cut_inline(
        context, monkeypatch, content_type):
    addon, _ = context
    threads: list[str] = []
    run = mcp_cuts.AnswerCut.run

    def watched(job: mcp_cuts.AnswerCut, response: http.Response) -> object:
        threads.append(threading.current_thread().name)
        return run(job, response)

    monkeypatch.setattr(mcp_cuts.AnswerCut, "run", watched)
    off_loop = big_flow(addon, content_type)
    assert respond_in_loop(addon, off_loop)
    inline = big_flow(addon, content_type)
    assert addon.mcp.response(inline) is None  # no loop running: nothing to keep moving
    assert outcome(off_loop) == outcome(inline)
    assert TRUNCATION_MARK.encode() in (off_loop.response.raw_content or b"")
    assert threads[0].startswith("obsmask-off-loop") and threads[1] == "MainThread"


def test_an_answer_below_the_threshold_is_cut_at_once_with_the_collector_paused(
        context, monkeypatch):
    """Cut inline, an answer is parsed with the garbage collector paused,
    as on the worker: the collections its parse would set off wait until
    the cut returns; the collector is on again afterwards."""
    addon, _ = context
    collector_on: list[bool] = []
    run = mcp_cuts.AnswerCut.run

    def watched(job: mcp_cuts.AnswerCut, response: http.Response) -> object:
        collector_on.append(gc.isenabled())
        return run(job, response)

    monkeypatch.setattr(mcp_cuts.AnswerCut, "run", watched)
    flow = requested(addon, mcp_flow(response_message()))
    assert not respond_in_loop(addon, flow)
    assert TRUNCATION_MARK.encode() in (flow.response.raw_content or b"")
    assert collector_on == [False] and gc.isenabled()


def test_a_compressed_answer_is_judged_by_its_decoded_size(context):
    """A gzip body below OFF_LOOP_BYTES, even decoded, still goes to the
    worker when its guessed decoded size is over: decoding is part of the
    work moved."""
    addon, _ = context
    # base64 of random bytes: gzip takes a quarter off it, no more.
    text = base64.b64encode(random.Random(1).randbytes(OFF_LOOP_BYTES // 3)).decode()
    flow = requested(addon, mcp_flow(b""))
    flow.response.headers["content-encoding"] = "gzip"
    flow.response.raw_content = gzip.compress(response_message(text))
    assert len(response_message(text)) < OFF_LOOP_BYTES
    assert len(flow.response.raw_content) * DECODED_PER_ENCODED_BYTE >= OFF_LOOP_BYTES
    assert respond_in_loop(addon, flow)
    assert TRUNCATION_MARK.encode() in gzip.decompress(flow.response.raw_content or b"")


def test_a_failure_on_the_worker_leaves_the_answer_as_it_came(context, monkeypatch, caplog):
    addon, _ = context

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("broken")

    monkeypatch.setattr(mcp_cuts, "truncate_jsonrpc_body", broken)
    flow = big_flow(addon)
    before = outcome(flow)
    with caplog.at_level(logging.ERROR):
        assert respond_in_loop(addon, flow)
    assert outcome(flow)[:2] == before[:2] and not flow.marked
    assert "internal error, POST /mcp answered unchanged" in caplog.text


def test_a_big_answer_that_is_not_json_rpc_is_left_alone_with_one_warning(context, caplog):
    addon, _ = context
    body = json.dumps({"not": "json-rpc", "text": BIG}).encode()
    flow = requested(addon, mcp_flow(body))
    with caplog.at_level(logging.WARNING):
        assert respond_in_loop(addon, flow)
    assert flow.response.raw_content == body
    assert "forwarded unchanged: not a JSON-RPC 2.0 message" in caplog.text
