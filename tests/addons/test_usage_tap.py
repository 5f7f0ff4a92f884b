"""The stream tap of the conversation addon (``mitm/usage_tap.py``): every
chunk of a streamed answer goes on unchanged, and the provider's usage is
recorded on the flow as soon as the event that completes the report has been
read, whatever the connection does afterwards."""

from __future__ import annotations

import json
import logging

import pytest
from mitmproxy.test import tflow

from obsmask_core.conversation.usage.usage_stream import SseUsageReader
from obsmask_core.mitm.usage_tap import UsageTap
from support.usage import ANTHROPIC_STREAM, STREAM_IDS, STREAMS, chat_chunk

# The end of each stream: where a client that has what it needs hangs up.
FINAL_EVENTS = {
    "chat": b"data: [DONE]",
    "responses": None,  # response.completed is the last event
    "anthropic": b"event: message_stop",
    "anthropic-cumulative-delta": b"event: message_stop",
}


def tapped() -> tuple[tflow.HTTPFlow, UsageTap]:
    flow = tflow.tflow(resp=True)
    return flow, UsageTap(flow, SseUsageReader())


@pytest.mark.parametrize(("stream", "expected"), STREAMS, ids=STREAM_IDS)
def test_the_usage_is_on_the_flow_before_the_stream_ends(stream, expected, caplog):
    """A client that hangs up right after the usage event (the stream
    callable then never sees the end of the body) still leaves the usage on
    the flow, with one comment line and one log line."""
    name = STREAM_IDS[[s for s, _ in STREAMS].index(stream)]
    cut = FINAL_EVENTS[name]
    head = stream if cut is None else stream[: stream.index(cut)]
    flow, tap = tapped()
    with caplog.at_level(logging.INFO):
        out = [tap(head[i : i + 100]) for i in range(0, len(head), 100)]
    assert b"".join(out) == head  # every byte went on
    assert flow.metadata["obsmask"]["provider_usage"] == expected.as_metadata()
    assert flow.comment.count("obsmask: provider reported") == 1
    assert caplog.text.count("provider reported") == 1


def test_a_stream_that_ends_normally_records_its_usage_once(caplog):
    flow, tap = tapped()
    with caplog.at_level(logging.INFO):
        tap(ANTHROPIC_STREAM)
        assert tap(b"") == b""
    assert flow.comment.count("obsmask: provider reported") == 1
    assert caplog.text.count("provider reported") == 1
    assert "provider_usage_problem" not in flow.metadata["obsmask"]


def test_a_stream_cut_before_the_usage_event_says_so():
    """The stream was cut (the client or the server went away) before the
    event that completes the report: the flow says so, and keeps what the
    first events reported (Anthropic's message_start: the input figures)."""
    flow, tap = tapped()
    tap(ANTHROPIC_STREAM.split(b"event: message_delta")[0])
    tap.cut_short("Client disconnected.")
    summary = flow.metadata["obsmask"]
    assert "cut before the provider's usage report (Client disconnected.)" in (
        summary["provider_usage_problem"])
    assert summary["provider_usage"]["input_tokens"] == 12
    assert summary["provider_usage"]["output_tokens"] == 1


def test_a_stream_cut_after_the_usage_event_has_no_problem():
    flow, tap = tapped()
    tap(ANTHROPIC_STREAM.split(b"event: message_stop")[0])
    tap.cut_short("Client disconnected.")
    assert "provider_usage_problem" not in flow.metadata["obsmask"]
    assert flow.metadata["obsmask"]["provider_usage"]["output_tokens"] == 15


def test_a_chat_stream_with_usage_on_every_chunk_is_complete_only_at_its_last_one():
    """Some servers (vLLM's continuous usage stats) put a usage object on
    every chunk; OpenAI's last one, before [DONE], has no choices. The
    figures recorded, and weighed by the provider's brake as they pass, are
    that last chunk's."""

    def usage(output: int) -> dict[str, object]:
        return {"prompt_tokens": 2000, "completion_tokens": output, "total_tokens": 2000 + output,
                "prompt_tokens_details": {"cached_tokens": 1920}}

    chunks = [chat_chunk({"content": "x"}, usage=usage(n)) for n in (1, 2, 3)]
    final = chat_chunk({}, usage=usage(300), choices=False)
    flow, tap = tapped()
    for chunk in chunks:
        tap(f"data: {json.dumps(chunk)}\n\n".encode())
    assert not tap.reader.complete and "provider_usage" not in flow.metadata.get("obsmask", {})
    tap(f"data: {json.dumps(final)}\n\n".encode())
    assert tap.reader.complete
    assert flow.metadata["obsmask"]["provider_usage"]["output_tokens"] == 300
