"""Which requests are conversations, and in which format
(``conversation/settings/routes.py``): a POST whose path, without its query, matches
a route's regular expression; the first route in field order wins, and an
empty route turns its format off."""

from __future__ import annotations

import pytest

from obsmask_core.conversation.settings.routes import FORMAT_TITLES, Routes
from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.settings import declared

DEFAULT = Routes()


@pytest.mark.parametrize(
    ("path", "format_name"),
    [
        ("/v1/chat/completions", "chat"),
        ("/openai/deployments/gpt/chat/completions", "chat"),
        ("/v1/chat/completions?api-version=2024-10-21", "chat"),
        ("/v1/messages", "anthropic"),
        ("/anthropic/v1/messages?beta=true", "anthropic"),
        ("/v1/responses", "responses"),
    ],
)
def test_the_default_routes_find_each_format(path, format_name):
    fmt = DEFAULT.format_of("POST", path)
    assert fmt is not None and fmt.name == format_name


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/chat/completions"),
        ("PUT", "/v1/messages"),
        ("POST", "/v1/messages/count_tokens"),
        ("POST", "/v1/responses/resp_1/cancel"),
        ("POST", "/v1/embeddings"),
        ("POST", "/v1/models?next=/v1/messages"),  # the query is not the path
    ],
)
def test_other_requests_are_no_conversation(method, path):
    assert DEFAULT.format_of(method, path) is None


def test_the_first_matching_route_in_field_order_wins():
    routes = Routes(chat_route=r"/api/", anthropic_route=r"/api/messages$",
                    responses_route=r"/api/")
    fmt = routes.format_of("POST", "/api/messages")
    assert fmt is not None and fmt.name == "chat"
    fmt = Routes(anthropic_route=r"/api/").format_of("POST", "/api/responses")
    assert fmt is not None and fmt.name == "anthropic"


def test_an_empty_route_turns_its_format_off():
    routes = Routes(anthropic_route="")
    assert routes.format_of("POST", "/v1/messages") is None
    fmt = routes.format_of("POST", "/v1/chat/completions")
    assert fmt is not None and fmt.name == "chat"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"chat_route": "("}, "chat_route: not a regular expression"),
        ({"responses_route": "[a-"}, "responses_route: not a regular expression"),
        ({"anthropic_route": 7}, "anthropic_route: must be a string, got an integer 7"),
        ({"stream_responses": "yes"}, "stream_responses: must be a boolean"),
    ],
)
def test_a_wrong_route_is_refused_naming_the_key(values, message):
    with pytest.raises(SettingError) as raised:
        Routes(**values)
    assert str(raised.value).startswith(message)


def test_the_routes_are_options_only_with_help_naming_the_format():
    """Routes, the host filter, the stream switch and the WebSocket refusal
    are not keys of mitm.toml; each route's help says which format it reads."""
    settings = {item.key: item for item in declared(Routes)}
    assert list(settings) == ["chat_route", "anthropic_route", "responses_route", "hosts",
                              "stream_responses", "refuse_websockets"]
    assert not any(item.info.in_file for item in settings.values())
    for name, title in FORMAT_TITLES.items():
        assert title in settings[f"{name}_route"].info.help
    assert DEFAULT.stream_responses is True
    assert DEFAULT.refuse_websockets is False


def test_only_a_websocket_upgrade_on_the_responses_route_is_refused_and_only_when_asked():
    """refuse_websockets: a client that falls back (Codex) then sends POSTs
    obsmask can mask; off by default, every upgrade goes on."""
    on = Routes(refuse_websockets=True)
    assert on.refuses_upgrade("GET", "/v1/responses", "websocket", None)
    assert on.refuses_upgrade("GET", "/v1/responses?x=1", "WebSocket", None)
    assert not on.refuses_upgrade("POST", "/v1/responses", "websocket", None)
    assert not on.refuses_upgrade("GET", "/v1/responses", "", None)
    assert not on.refuses_upgrade("GET", "/v1/chat/completions", "websocket", None)
    assert not Routes().refuses_upgrade("GET", "/v1/responses", "websocket", None)
