"""The totals addon in mitmproxy's test context: it adds each finished
flow's facts once, after every other addon's hooks, serves them at
/obsmask/totals and /obsmask/metrics to the loopback only (unless told), and
logs the summary when the proxy stops."""

from __future__ import annotations

import asyncio
import gc
import json
import logging

import pytest
from mitmproxy.test import taddons, tflow, tutils

from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.settings_addon import SettingsFile
from obsmask_core.mitm.totals_addon import RunTotals
from support.chat import body, conversation


@pytest.fixture
def proxy(toml_file, caplog):
    """The settings addon, conversation masking and the totals, in the
    order obsmask.py lists them."""
    settings = SettingsFile()
    masking, totals = ConversationMasking(settings), RunTotals(settings)
    with taddons.context(settings, masking, totals) as tctx:
        tctx.configure(masking, obsmask_config=toml_file(""), obsmask_window_turns=1)
        with caplog.at_level(logging.INFO):
            yield masking, totals, tctx


def chat_exchange(turns: int, answer: bytes = b'{"usage": {"prompt_tokens": 50}}'
                  ) -> tflow.HTTPFlow:
    request = tutils.treq(method=b"POST", path=b"/v1/chat/completions", content=b"")
    request.raw_content = body(conversation(turns=turns))
    flow = tflow.tflow(req=request, resp=tutils.tresp(content=answer))
    flow.response.headers["content-type"] = "application/json"
    return flow


def route_flow(path: str, peer: str = "127.0.0.1", method: bytes = b"GET") -> tflow.HTTPFlow:
    flow = tflow.tflow(req=tutils.treq(method=method, path=path.encode(), content=b""))
    flow.client_conn.peername = (peer, 50000)
    return flow


def finish(masking: ConversationMasking, totals: RunTotals, flow: tflow.HTTPFlow) -> None:
    """The hooks a finished flow goes through, in the proxy's order."""
    for addon in (masking, totals):
        addon.request(flow)
    for addon in (masking, totals):
        addon.response(flow)


def test_a_finished_flow_is_added_with_its_provider_usage(proxy):
    masking, totals, _ = proxy
    flow = chat_exchange(turns=3)
    finish(masking, totals, flow)
    assert flow.metadata["obsmask"]["action"] == "masked"
    figures = totals.totals.requests
    assert (figures.requests, figures.masked) == (1, 1)
    assert figures.tool_results_masked == flow.metadata["obsmask"]["masked_tool_results"]
    assert figures.provider["input_tokens"] == 50  # read by the masking addon's response hook


def test_on_the_event_loop_a_flow_is_added_once_its_answer_has_gone_on(proxy):
    """The totals never hold an answer: its flow is added two turns of the
    loop after its hooks."""
    masking, totals, _ = proxy
    flow = chat_exchange(turns=3)

    async def hooks() -> int:
        finish(masking, totals, flow)
        in_the_hook = totals.totals.requests.requests
        for _ in range(2):  # the turn after next (see flows.after_this_turn)
            await asyncio.sleep(0)
        return in_the_hook

    assert asyncio.run(hooks()) == 0
    assert totals.totals.requests.requests == 1


def test_a_flow_with_an_answer_and_an_error_is_added_once(proxy):
    masking, totals, _ = proxy
    flow = chat_exchange(turns=3)
    finish(masking, totals, flow)
    flow.error = tflow.terr()
    totals.error(flow)
    assert totals.totals.requests.requests == 1


def test_a_flow_obsmask_never_looked_at_is_not_counted(proxy):
    _, totals, _ = proxy
    flow = tflow.tflow(resp=True)
    totals.response(flow)
    assert totals.totals.requests.requests == 0 and totals.totals.mcp.answers == 0


def test_the_totals_route_answers_json_that_equals_the_command(proxy):
    masking, totals, tctx = proxy
    finish(masking, totals, chat_exchange(turns=3))
    flow = route_flow("/obsmask/totals")
    totals.request(flow)
    assert flow.response is not None and flow.response.status_code == 200
    assert flow.response.headers["content-type"] == "application/json"
    served = json.loads(flow.response.content or b"")
    assert served["requests"]["masked"] == 1
    commanded = json.loads(tctx.master.commands.call("obsmask.totals"))
    assert {k: v for k, v in served.items() if k != "since"} == {
        k: v for k, v in commanded.items() if k != "since"}


def test_the_metrics_route_answers_the_prometheus_text_format(proxy):
    masking, totals, _ = proxy
    finish(masking, totals, chat_exchange(turns=3))
    flow = route_flow("/obsmask/metrics?x=1")
    totals.request(flow)
    assert flow.response is not None and flow.response.status_code == 200
    assert flow.response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = (flow.response.content or b"").decode()
    assert 'obsmask_conversation_requests_total{action="masked"} 1.0' in text
    assert "obsmask_mask_seconds_count 1.0" in text


def test_a_client_off_the_loopback_is_refused_unless_its_network_is_allowed(proxy):
    _, totals, tctx = proxy
    flow = route_flow("/obsmask/totals", peer="192.0.2.7")
    totals.request(flow)
    assert flow.response is not None and flow.response.status_code == 403
    tctx.configure(totals, obsmask_totals_allow_clients=["192.0.2.0/24"])
    allowed = route_flow("/obsmask/totals", peer="192.0.2.7")
    totals.request(allowed)
    assert allowed.response is not None and allowed.response.status_code == 200


def test_only_get_is_served_and_other_paths_are_left_alone(proxy):
    _, totals, _ = proxy
    posted = route_flow("/obsmask/totals", method=b"POST")
    totals.request(posted)
    assert posted.response is not None and posted.response.status_code == 405
    other = route_flow("/obsmask/totalsx")
    totals.request(other)
    assert other.response is None


def test_with_the_totals_off_nothing_is_added_and_the_routes_answer_404(proxy):
    masking, totals, tctx = proxy
    tctx.configure(totals, obsmask_totals_enabled=False)
    finish(masking, totals, chat_exchange(turns=3))
    assert totals.totals.requests.requests == 0
    flow = route_flow("/obsmask/metrics")
    totals.request(flow)
    assert flow.response is not None and flow.response.status_code == 404


def test_the_summary_is_logged_when_the_proxy_stops(proxy, caplog):
    masking, totals, _ = proxy
    finish(masking, totals, chat_exchange(turns=3))
    caplog.clear()
    totals.done()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("obsmask: totals: 1 conversation request(s): 1 masked")
    assert any("the provider reported 1 answer(s): 50 input" in line for line in lines)


def test_a_broken_fact_is_logged_with_its_traceback_and_the_flow_goes_on(proxy, caplog,
                                                                         monkeypatch):
    masking, totals, _ = proxy

    def broken(*_: object) -> None:
        raise RuntimeError("boom")
    monkeypatch.setattr(totals.totals, "add_flow", broken)
    flow = chat_exchange(turns=3)
    finish(masking, totals, flow)
    record = next(r for r in caplog.records if "not added to the totals" in r.getMessage())
    assert record.exc_info is not None


def test_a_flow_still_open_shows_in_the_routes_and_is_added_when_the_proxy_stops(proxy, caplog):
    """mitmproxy stops without ending open flows (a long-lived MCP event
    stream): what they did so far is served while they last, and added to
    the summary at the end."""
    masking, totals, _ = proxy
    stream = chat_exchange(turns=3)
    masking.request(stream)
    totals.request(stream)  # no answer yet
    assert totals.totals.requests.requests == 0
    flow = route_flow("/obsmask/totals")
    totals.request(flow)
    assert json.loads(flow.response.content or b"")["requests"]["masked"] == 1
    assert totals.totals.requests.requests == 0  # served, not added twice
    caplog.clear()
    totals.done()
    assert totals.totals.requests.masked == 1
    assert caplog.records[0].getMessage().startswith("obsmask: totals: 1 conversation request")


def test_a_replayed_flow_is_added_again(proxy):
    """mitmweb's Replay sends the same flow object again: a second request
    that reached the provider."""
    masking, totals, _ = proxy
    flow = chat_exchange(turns=3)
    finish(masking, totals, flow)
    flow.live = True
    finish(masking, totals, flow)
    assert totals.totals.requests.requests == 2


def test_an_answer_to_head_has_the_headers_of_get_and_no_body(proxy):
    _, totals, _ = proxy
    flow = route_flow("/obsmask/metrics", method=b"HEAD")
    totals.request(flow)
    assert flow.response is not None and flow.response.status_code == 200
    assert flow.response.content == b"" and int(flow.response.headers["content-length"]) > 0


def test_a_failure_while_serving_answers_500_and_never_goes_upstream(proxy, monkeypatch, caplog):
    _, totals, _ = proxy

    def broken() -> bytes:
        raise OverflowError("boom")
    monkeypatch.setattr(totals.metrics, "exposition", broken)
    flow = route_flow("/obsmask/metrics")
    totals.request(flow)
    assert flow.response is not None and flow.response.status_code == 500
    assert any(r.exc_info for r in caplog.records if "answered 500" in r.getMessage())


def test_the_ledger_s_prediction_of_the_cache_is_added_beside_the_provider_s_report(proxy,
                                                                                     caplog):
    """Under a price model with a cache, each flow carries the ledger's
    prediction; the totals add it up with the provider's report of the
    same answer, and log the two side by side. (The stub's model is not in
    the model table: the ledger bills it under OpenAI's most cautious rule,
    the breakpoints of GPT-5.6 and later.)"""
    masking, totals, tctx = proxy
    tctx.configure(masking, obsmask_price_model="auto")
    answer = b'{"usage": {"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 0}}}'
    flow = chat_exchange(turns=3, answer=answer)
    finish(masking, totals, flow)
    predicted = flow.metadata["obsmask"]["bill"]["predicted"]
    figures = totals.totals.requests.cache
    assert list(figures) == [("chat", "openai_breakpoints")]
    only = figures["chat", "openai_breakpoints"]
    assert (only.requests, only.predicted.input, only.reported.input, only.reported.read) == (
        1, predicted["input_tokens"], 900, 0)
    caplog.clear()
    totals.done()
    assert any(r.getMessage().startswith(
        "obsmask: totals: cache predicted vs reported (chat, openai_breakpoints; 1 answer(s)): "
        "hit rate ")
        for r in caplog.records)


def test_the_collector_is_timed_from_running_to_done_and_not_after(proxy):
    """The proxy times its garbage collections while it runs; once done,
    its callback leaves the interpreter (a second proxy in the process, or
    a test, does not keep paying for it)."""
    _, totals, _ = proxy
    timed = totals.metrics.gc_pauses
    try:
        totals.running()
        assert timed._callback in gc.callbacks
        gc.collect(0)
        assert timed.longest[0] > 0
        totals.done()
        assert timed._callback not in gc.callbacks
        after_done = list(timed.longest)
        gc.collect(0)
        assert timed.longest == after_done
    finally:
        timed.stop()
