"""The requests measure.py reads (``scripts/benchlib/measure/inputs.py``):
a request body in the format its shape says, a flow in the format of the
route that matches it (the routes in force), the client's body (the
backup of a flow obsmask masked) with the provider's figures, and the
requests it cannot measure skipped and counted with the reason."""

from __future__ import annotations

import json

import pytest

from benchlib.errors import BenchError
from obsmask_core.conversation.settings.routes import Routes
from obsmask_core.conversation.usage.provider_usage import ProviderUsage
from obsmask_core.offline.measure.inputs import FLOWS, REQUEST_BODY, read_inputs
from support.flow_files import post_flow, with_unreadable_backup, write_flows
from support.formats import session, to_anthropic, to_chat, to_responses

EVENTS = session(3)
DOCUMENTS = {
    "chat": {"model": "m", "messages": to_chat(EVENTS)},
    "anthropic": {"model": "m", "max_tokens": 100, "messages": to_anthropic(EVENTS)},
    "responses": {"model": "m", "input": to_responses(EVENTS)},
}
ROUTES = {"chat": "/v1/chat/completions", "anthropic": "/v1/messages",
          "responses": "/v1/responses"}


def _bytes(document: object) -> bytes:
    return json.dumps(document).encode()


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_a_request_body_is_read_in_the_format_its_shape_says(tmp_path, name):
    path = tmp_path / f"{name}.json"
    path.write_bytes(_bytes(DOCUMENTS[name]))
    [request], [summary] = read_inputs([path], Routes())
    items, _, fmt = request.body
    assert fmt.name == name and items == DOCUMENTS[name][fmt.list_member]
    assert (request.flow, request.where, summary.kind) == (None, str(path), REQUEST_BODY)


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_a_flow_is_read_in_the_format_of_its_route(tmp_path, name):
    # A Responses body sent to the chat route would be refused: the route decides.
    path = write_flows(tmp_path / "flows.mitm",
                       [post_flow(ROUTES[name], _bytes(DOCUMENTS[name]))])
    [request], [summary] = read_inputs([path], Routes())
    assert request.body[2].name == name and request.flow == 1
    assert (summary.kind, summary.http_requests, summary.conversation_requests) == (FLOWS, 1, 1)


def test_the_routes_and_hosts_in_force_decide_which_flows_are_conversations(tmp_path):
    chat = _bytes(DOCUMENTS["chat"])
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/llm/chat", chat, host="llm.internal"),
        post_flow("/v1/chat/completions", chat, host="llm.internal"),
        post_flow("/llm/chat", chat, host="elsewhere.example"),
    ])
    routes = Routes(chat_route="/llm/chat$", hosts=r"^llm\.internal$")
    requests, [summary] = read_inputs([path], routes)
    assert [request.flow for request in requests] == [1]
    assert (summary.http_requests, summary.conversation_requests, summary.skipped) == (3, 1, {})


def test_a_masked_flow_is_read_from_its_backup_with_the_providers_figures(tmp_path):
    original = _bytes(DOCUMENTS["chat"])
    masked = _bytes({"model": "m", "messages": to_chat(EVENTS)[:2]})
    usage = {"input_tokens": 1200, "cached_input_tokens": 1024, "output_tokens": 9}
    path = write_flows(tmp_path / "flows.mitm", [post_flow(
        "/v1/chat/completions", original, masked=masked,
        metadata={"action": "masked", "provider_usage": usage})])
    [request], [summary] = read_inputs([path], Routes())
    assert request.body[0] == DOCUMENTS["chat"]["messages"]
    assert request.from_backup and request.action == "masked"
    assert request.usage == ProviderUsage(1200, 1024, None, 9)
    assert (summary.from_backup, summary.masked_when_recorded,
            summary.with_provider_usage) == (1, 1, 1)


def test_the_requests_it_cannot_measure_are_skipped_and_counted_with_the_reason(tmp_path):
    chat = _bytes(DOCUMENTS["chat"])
    path = write_flows(tmp_path / "flows.mitm", [
        # Masked by obsmask, but saved without its backup, or with one that
        # cannot be read: no original to measure.
        post_flow("/v1/chat/completions", chat, metadata={"action": "masked"}),
        with_unreadable_backup(post_flow("/v1/chat/completions", chat, masked=chat[:-1] + b" }",
                                         metadata={"action": "masked"})),
        post_flow("/v1/chat/completions", b"not json"),
        post_flow("/v1/messages", _bytes({"model": "m", "messages": []})),
        post_flow("/v1/responses", _bytes(DOCUMENTS["responses"])),
    ])
    requests, [summary] = read_inputs([path], Routes())
    assert [request.flow for request in requests] == [5]
    assert summary.skipped == {
        "masked when recorded, and its original is not in the flow (no backup, or one that "
        "cannot be read)": 2,
        "not a JSON OpenAI Chat Completions request": 1,
        "an empty conversation": 1,
    }


def test_a_flow_obsmask_recorded_on_a_route_not_in_force_is_skipped_with_the_reason(tmp_path):
    """The proxy read it as a conversation request (its metadata names the
    format); measured with routes that do not match it, it is counted as
    skipped, not dropped without a word."""
    original = _bytes(DOCUMENTS["chat"])
    path = write_flows(tmp_path / "flows.mitm", [
        post_flow("/llm/chat", original, masked=_bytes({"model": "m", "messages": []}),
                  metadata={"action": "masked", "format": "chat"}),
        post_flow("/llm/chat", original, metadata={"action": "unchanged", "format": "chat"}),
        post_flow("/llm/other", original),  # never a conversation request: not counted
        post_flow("/v1/chat/completions", original),
    ])
    requests, [summary] = read_inputs([path], Routes())
    assert [request.flow for request in requests] == [4]
    assert summary.skipped == {
        "recorded by obsmask as an OpenAI Chat Completions request, on a route the settings "
        "in force do not read as one (obsmask_*_route, obsmask_hosts)": 2}
    requests, [summary] = read_inputs([path], Routes(chat_route="/llm/chat$"))
    assert [request.flow for request in requests] == [1, 2] and summary.skipped == {}
    assert requests[0].body[0] == DOCUMENTS["chat"]["messages"]


def test_what_obsmask_recorded_is_read_with_its_checks(tmp_path):
    path = write_flows(tmp_path / "flows.mitm", [post_flow(
        "/v1/chat/completions", _bytes(DOCUMENTS["chat"]),
        metadata={"action": 7, "format": ["chat"],
                  "provider_usage": {"input_tokens": 10**400, "cached_input_tokens": 5}})])
    [request], [summary] = read_inputs([path], Routes())
    assert request.action is None and request.usage == ProviderUsage(cached_input_tokens=5)
    assert summary.with_provider_usage == 1


def test_inputs_with_no_conversation_are_refused_with_one_line(tmp_path):
    path = write_flows(tmp_path / "flows.mitm", [post_flow("/v1/models", b"", method="GET")])
    with pytest.raises(BenchError, match=r"^no conversation request in .*flows\.mitm"):
        read_inputs([path], Routes())
    body = tmp_path / "body.json"
    body.write_text('{"tools": []}')
    with pytest.raises(BenchError, match=r"body\.json: not a Chat Completions, Anthropic"):
        read_inputs([body], Routes())
