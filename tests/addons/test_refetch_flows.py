"""Re-fetches as a user of the proxy sees them: the flow's comment names
the calls, one log line says it once per re-fetch flow, and the totals
(/obsmask/totals, /obsmask/metrics, the summary when the proxy stops)
count each re-fetch once over the conversation's requests."""

from __future__ import annotations

import json
import logging

import pytest
from mitmproxy.test import taddons, tflow, tutils

from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked, RewriteOutcome, Unchanged
from obsmask_core.conversation.turns.wire_formats import CHAT
from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.settings_addon import SettingsFile
from obsmask_core.mitm.totals_addon import RunTotals
from support.formats import LONG_OUTPUT, Call, Event, Result, Say, Turn, convert


def read(call_id: str, path: str) -> list[Event]:
    return [Turn([Call(call_id, "read_file", {"path": path})]),
            Result(call_id, f"{LONG_OUTPUT}\n({path}, {call_id})")]


# The model reads a.py, b.py and c.py, then a.py again once a window of
# one tool turn has masked its first read: r4 is a re-fetch of r1.
STEPS = [read("r1", "a.py"), read("r2", "b.py"), read("r3", "c.py"), read("r4", "a.py")]


def requests_of_the_session() -> list[list[Event]]:
    """The request after each result: the history so far."""
    events: list[Event] = [Say("user", "Fix the bug.")]
    requests = []
    for step in STEPS:
        events = events + step
        requests.append(events)
    return requests


@pytest.fixture
def proxy(toml_file, caplog):
    settings = SettingsFile()
    masking, totals = ConversationMasking(settings), RunTotals(settings)
    with taddons.context(settings, masking, totals) as tctx:
        tctx.configure(masking, obsmask_config=toml_file(""), obsmask_window_turns=1)
        with caplog.at_level(logging.INFO):
            yield masking, totals


def exchange(events: list[Event]) -> tflow.HTTPFlow:
    content = json.dumps({"model": "gpt-4o", "messages": convert(CHAT, events)}).encode()
    request = tutils.treq(method=b"POST", path=b"/v1/chat/completions", content=content)
    request.headers["content-type"] = "application/json"
    flow = tflow.tflow(req=request, resp=tutils.tresp(content=b'{"usage": {}}'))
    flow.response.headers["content-type"] = "application/json"
    return flow


def finish(masking: ConversationMasking, totals: RunTotals, flow: tflow.HTTPFlow) -> None:
    for addon in (masking, totals):
        addon.request(flow)
    for addon in (masking, totals):
        addon.response(flow)


def run_session(masking: ConversationMasking, totals: RunTotals) -> list[tflow.HTTPFlow]:
    flows = [exchange(events) for events in requests_of_the_session()]
    for flow in flows:
        finish(masking, totals, flow)
    return flows


def test_the_refetch_flow_s_comment_names_the_call_and_no_other_flow_s_does(proxy):
    flows = run_session(*proxy)
    assert [flow.metadata["obsmask"].get("refetches", {}).get("new_calls")
            for flow in flows] == [None, None, None, ["r4"]]
    assert "re-fetch of a masked result: r4" in (flows[-1].comment or "")
    assert not any("re-fetch" in (flow.comment or "") for flow in flows[:-1])


def test_one_log_line_says_the_refetch_once(proxy, caplog):
    run_session(*proxy)
    lines = [r.getMessage() for r in caplog.records if "re-fetch" in r.getMessage()]
    assert len(lines) == 1 and "re-fetch of a masked result: r4" in lines[0]
    assert next(r for r in caplog.records if "re-fetch" in r.getMessage()).levelno == logging.INFO


def route(totals: RunTotals, path: str) -> bytes:
    flow = tflow.tflow(req=tutils.treq(method=b"GET", path=path.encode(), content=b""))
    flow.client_conn.peername = ("127.0.0.1", 50000)
    totals.request(flow)
    assert flow.response is not None and flow.response.status_code == 200
    return flow.response.content or b""


def test_the_totals_route_counts_the_refetch_once_over_the_conversation(proxy):
    masking, totals = proxy
    flows = run_session(masking, totals)
    # The request after the model's next answer still carries the count of
    # the conversation, and adds no new re-fetch.
    later = exchange([*requests_of_the_session()[-1], Say("assistant", "Done.")])
    finish(masking, totals, later)
    assert later.metadata["obsmask"]["refetches"]["in_conversation"] == 1
    served = json.loads(route(totals, "/obsmask/totals"))
    refetches = served["requests"]["refetches"]
    assert (refetches["calls"], refetches["tools"], refetches["extra_turns"]) == (
        1, {"read_file": 1}, 1)
    assert refetches["result_tokens"] == flows[-1].metadata["obsmask"]["refetches"][
        "result_tokens"] > 0
    (conversation,) = served["conversations"].values()
    assert conversation["refetches"]["calls"] == 1


def test_the_metrics_route_counts_the_refetch_under_its_tool(proxy):
    run_session(*proxy)
    text = route(proxy[1], "/obsmask/metrics").decode()
    assert 'obsmask_refetches_total{tool="read_file"} 1.0' in text
    assert "obsmask_refetch_extra_turns_total 1.0" in text


def test_the_summary_when_the_proxy_stops_names_the_refetch(proxy, caplog):
    masking, totals = proxy
    run_session(masking, totals)
    caplog.clear()
    totals.done()
    assert any(r.getMessage().startswith("obsmask: totals: 1 re-fetch(es) of a masked result "
                                         "(read_file 1): ") for r in caplog.records)


def test_a_flow_file_s_bad_refetch_value_never_stops_the_totals(proxy):
    """A flow read from a file may hold anything under "refetches"."""
    masking, totals = proxy
    flow = exchange(requests_of_the_session()[-1])
    finish(masking, totals, flow)
    replayed = exchange(requests_of_the_session()[-1])
    replayed.metadata["obsmask"] = {**flow.metadata["obsmask"],
                                    "refetches": {"new": "one", "new_tools": {"read_file": []}}}
    totals.request(replayed)
    totals.response(replayed)
    assert totals.totals.requests.requests == 2
    assert totals.totals.requests.refetches.calls == 1  # the first flow's alone


def test_a_request_left_unchanged_with_a_new_refetch_says_it_too(proxy, caplog, monkeypatch):
    """A plan may find a re-fetch and still change nothing: the comment and
    one log line name the call all the same."""

    masked = Masker.mask

    def nothing_changed(*args: object, **kwargs: object) -> RewriteOutcome:
        outcome = masked(*args, **kwargs)
        assert isinstance(outcome, Masked)
        return Unchanged("nothing to mask", outcome.plan)

    monkeypatch.setattr(Masker, "mask", nothing_changed)
    flows = run_session(*proxy)
    assert flows[-1].metadata["obsmask"]["action"] == "unchanged"
    assert flows[-1].comment == ("obsmask: re-fetch of a masked result: r4; "
                                 "unchanged: nothing to mask")
    assert not any(flow.comment for flow in flows[:-1])
    lines = [r.getMessage() for r in caplog.records if "re-fetch" in r.getMessage()]
    assert len(lines) == 1 and lines[0].endswith(
        ": re-fetch of a masked result: r4; unchanged: nothing to mask")
    assert proxy[1].totals.requests.refetches.calls == 1
