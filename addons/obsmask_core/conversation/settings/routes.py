"""Which requests are conversations, and in which wire format: the routes,
declared once as option-only settings (``obsmask_<key>``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.settings import check_fields, setting

FORMAT_TITLES: Mapping[str, str] = MappingProxyType({
    "chat": "OpenAI Chat Completions",
    "anthropic": "Anthropic Messages",
    "responses": "OpenAI Responses",
})


def _check_pattern(key: str, value: object) -> None:
    if isinstance(value, str):
        try:
            re.compile(value)
        except re.error as e:
            raise SettingError(key, f"not a regular expression ({e})") from None


def _route_help(title: str) -> str:
    return (f"Regular expression searched in the path (without the query) of POST "
            f"requests: the ones that match are read as {title} requests. An empty value "
            "turns this format off.")


@dataclass(frozen=True, kw_only=True)
class Routes:
    """A POST whose path matches a route is read as that route's format; the
    first match in the order of the fields wins."""

    chat_route: str = setting(r"/chat/completions$", _route_help(FORMAT_TITLES["chat"]),
                              check=_check_pattern, in_file=False)
    anthropic_route: str = setting(r"/v1/messages$", _route_help(FORMAT_TITLES["anthropic"]),
                                   check=_check_pattern, in_file=False)
    responses_route: str = setting(r"/v1/responses$", _route_help(FORMAT_TITLES["responses"]),
                                   check=_check_pattern, in_file=False)
    hosts: str = setting("", r"""
        Regular expression searched in the host of a request (lower case; the
        Host header or the authority the client asked for, e.g.
        "(^|\.)(openai|anthropic)\.com$"): only requests to matching hosts are
        read as conversations, every other one passes byte for byte. Empty: any
        host (the routes alone decide).""", check=_check_pattern, in_file=False)
    stream_responses: bool = setting(True, """
        Pass text/event-stream answers to matching requests on as they arrive
        (mitmproxy otherwise holds a response until it is complete, which
        stalls a streaming client). Turn off to keep the whole answer in the
        flow, e.g. to read it in mitmweb.""", in_file=False)
    refuse_websockets: bool = setting(False, """
        Answer a WebSocket upgrade on the Responses route with 426 Upgrade
        Required, so that a client which then falls back to HTTP (Codex does,
        at once) sends each request as a POST that obsmask can mask. Off: the
        upgrade goes on to the provider, and such a client's requests travel
        as WebSocket messages, which obsmask does not read. obsmask codex
        turns it on.""", in_file=False)
    _compiled: tuple[tuple[re.Pattern[str], WireFormat], ...] = field(
        init=False, repr=False, compare=False)
    _hosts: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_fields(self)
        compiled = tuple(
            (re.compile(pattern), fmt)
            for pattern, fmt in ((self.chat_route, CHAT), (self.anthropic_route, ANTHROPIC),
                                 (self.responses_route, RESPONSES))
            if pattern
        )
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_hosts", re.compile(self.hosts) if self.hosts else None)

    def format_of(self, method: str, path: str, host: str | None = None) -> WireFormat | None:
        """The format of a request, or None when it is no conversation (not
        a POST, no route matches, or ``host`` is given and ``hosts`` does
        not match it)."""
        if method != "POST":
            return None
        if host is not None and self._hosts is not None and not self._hosts.search(host.lower()):
            return None
        path = path.split("?", 1)[0]
        for route, fmt in self._compiled:
            if route.search(path):
                return fmt
        return None

    def refuses_upgrade(self, method: str, path: str, upgrade: str, host: str | None) -> bool:
        """Whether a request is a WebSocket upgrade on the Responses route
        that ``refuse_websockets`` answers with 426."""
        return (self.refuse_websockets and method == "GET" and upgrade.lower() == "websocket"
                and self.format_of("POST", path, host) == RESPONSES)
