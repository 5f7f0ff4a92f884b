"""The ``obsmask_hosts`` route (``conversation/settings/routes.py``): a regular
expression searched in the request's host, lower case; empty, any host."""

from __future__ import annotations

import pytest

from obsmask_core.conversation.settings.routes import Routes
from obsmask_core.shared.errors import SettingError

PROVIDERS = Routes(hosts=r"(^|\.)(openai|anthropic)\.com$")


@pytest.mark.parametrize("host", ["api.openai.com", "API.Anthropic.COM", "anthropic.com"])
def test_a_matching_host_is_read_by_its_route(host):
    fmt = PROVIDERS.format_of("POST", "/v1/messages", host)
    assert fmt is not None and fmt.name == "anthropic"


@pytest.mark.parametrize("host", ["api.example.com", "openai.com.example.net", "127.0.0.1"])
def test_another_host_is_no_conversation(host):
    assert PROVIDERS.format_of("POST", "/v1/chat/completions", host) is None


def test_without_hosts_every_host_and_no_host_is_read():
    assert Routes().format_of("POST", "/v1/responses", "anything.example") is not None
    assert PROVIDERS.format_of("POST", "/v1/responses") is not None  # no host given


def test_a_bad_expression_is_refused():
    with pytest.raises(SettingError, match="hosts: not a regular expression"):
        Routes(hosts="(")
