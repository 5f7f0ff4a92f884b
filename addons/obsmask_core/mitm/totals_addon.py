"""The mitmproxy addon of the totals: every finished flow's facts added up,
the summary logged when the proxy stops (``mitmdump -nr`` too), the
``obsmask.totals`` command, and two routes the proxy answers itself on any
host: ``/obsmask/totals`` (JSON) and ``/obsmask/metrics`` (Prometheus).

It comes last in the addon list: a flow's facts are complete once every
other addon's ``response`` (or ``error``) hook has run.
"""

from __future__ import annotations

import json
import logging

from mitmproxy import command, http
from mitmproxy.addonmanager import Loader

from obsmask_core.mitm.flows import CONVERSATION_METADATA, MCP_METADATA, after_this_turn, where
from obsmask_core.mitm.options import add_options, settings_in_force
from obsmask_core.mitm.settings_addon import FILE_OPTIONS, SettingsFile
from obsmask_core.shared.networks import Network, client_allowed, client_networks
from obsmask_core.totals.metrics import CONTENT_TYPE, Metrics
from obsmask_core.totals.settings import (
    METRICS_PATH,
    TOTALS_PATH,
    TOTALS_SECTION,
    TotalsSettings,
)
from obsmask_core.totals.totals import Totals

logger = logging.getLogger(__name__)

PREFIX = "obsmask_totals_"
ROUTES = frozenset({TOTALS_PATH, METRICS_PATH})


def route_of(path: str) -> str | None:
    route = path.split("?", 1)[0].rstrip("/")
    return route if route in ROUTES else None


class RunTotals:
    """Adds up what obsmask did in this run and tells it."""

    def __init__(self, settings: SettingsFile) -> None:
        self.settings_file = settings
        self.settings = TotalsSettings()
        self.allowed: tuple[Network, ...] = ()
        self.totals = Totals()
        self.metrics = Metrics(self.totals)
        # The flows under way (by id): each is added once, when it ends (an
        # answer, or an error: a flow read from a file may have both); a
        # replay is under way again, and added again. The ones still open
        # (a long-lived event stream) count in what the routes serve, and
        # are added when the proxy stops.
        self._open: dict[str, http.HTTPFlow] = {}
        self._options: set[str] = set(FILE_OPTIONS)

    def load(self, loader: Loader) -> None:
        self._options.update(add_options(loader, TotalsSettings, PREFIX))

    def configure(self, updated: set[str]) -> None:
        if not updated & self._options:
            return
        config = self.settings_file.current()
        settings = settings_in_force(TotalsSettings, PREFIX, config, TOTALS_SECTION,
                                     lambda: config.settings(TotalsSettings, TOTALS_SECTION))
        self.allowed = client_networks("allow_clients", settings.allow_clients)
        self.totals.conversations_kept = settings.conversations_kept
        self.totals.cents_per_million = settings.input_cents_per_million_tokens
        self.settings = settings

    def running(self) -> None:
        self.metrics.gc_pauses.start()

    def request(self, flow: http.HTTPFlow) -> None:
        self._open[flow.id] = flow
        # A flow read from a file already has its answer.
        if (route := route_of(flow.request.path)) is None or flow.response:
            return
        self._serve(flow, route)

    # Counted once the answer has gone on: nobody waits for the totals.
    def response(self, flow: http.HTTPFlow) -> None:
        after_this_turn(flow, self._count, flow)

    def error(self, flow: http.HTTPFlow) -> None:
        after_this_turn(flow, self._count, flow)

    def done(self) -> None:
        self.metrics.gc_pauses.stop()
        # mitmproxy stops without ending the flows still open.
        for flow in list(self._open.values()):
            self._count(flow)
        if not self.settings.enabled:
            return
        for line in self.totals.summary_lines():
            logger.info("obsmask: %s", line)

    def _now(self) -> Totals:
        """The totals with the flows still open added as they stand: an
        MCP event stream's cuts show while it lasts."""
        if not any(_has_facts(flow) for flow in self._open.values()):
            return self.totals
        now = self.totals.copy()
        for flow in self._open.values():
            now.add_flow(flow.metadata.get(CONVERSATION_METADATA),
                         flow.metadata.get(MCP_METADATA))
        return now

    # mitmproxy's decorator has no type hints; the command's are checked by
    # mitmproxy itself when it registers it.
    @command.command("obsmask.totals")  # type: ignore[untyped-decorator]
    def totals_json(self) -> str:
        """What obsmask did in this run: the totals as JSON (also at
        /obsmask/totals on the proxy)."""
        return json.dumps(self._now().as_json(), indent=1)

    def _count(self, flow: http.HTTPFlow) -> None:
        if self._open.pop(flow.id, None) is None or not self.settings.enabled:
            return
        conversation, mcp = (flow.metadata.get(CONVERSATION_METADATA),
                             flow.metadata.get(MCP_METADATA))
        if conversation is None and mcp is None:
            return
        try:
            request = self.totals.add_flow(conversation, mcp)
            if request is not None and request.mask_ms is not None:
                self.metrics.observe_mask_ms(request.mask_ms)
        except Exception:  # the totals must never disturb the traffic
            logger.exception("obsmask: internal error, %s not added to the totals", where(flow))

    def _serve(self, flow: http.HTTPFlow, route: str) -> None:
        try:
            self._answer_route(flow, route)
        except Exception:  # answered here all the same: the route never goes upstream
            logger.exception("obsmask: internal error, %s answered 500", where(flow))
            _answer(flow, 500, b"obsmask: internal error (see the proxy's log)\n")

    def _answer_route(self, flow: http.HTTPFlow, route: str) -> None:
        peer = flow.client_conn.peername
        if not self.settings.enabled:
            _answer(flow, 404, b"obsmask totals are off ([totals] enabled, "
                               b"obsmask_totals_enabled)\n")
        elif peer and not client_allowed(str(peer[0]), self.allowed):
            _answer(flow, 403, f"client {peer[0]} is not on the loopback; obsmask serves "
                               "its totals to other clients only in the networks of "
                               "obsmask_totals_allow_clients ([totals] allow_clients)\n"
                               .encode())
            logger.warning("obsmask: %s: refused to %s", where(flow), peer[0])
        elif flow.request.method not in ("GET", "HEAD"):
            _answer(flow, 405, b"GET or HEAD only\n", {"allow": "GET, HEAD"})
        elif route == TOTALS_PATH:
            body = json.dumps(self._now().as_json(), indent=1).encode() + b"\n"
            _answer(flow, 200, body, {"content-type": "application/json"})
        else:
            now = self._now()
            metrics = self.metrics if now is self.totals else self.metrics.reading(now)
            _answer(flow, 200, metrics.exposition(), {"content-type": CONTENT_TYPE})


def _has_facts(flow: http.HTTPFlow) -> bool:
    return CONVERSATION_METADATA in flow.metadata or MCP_METADATA in flow.metadata


def _answer(flow: http.HTTPFlow, status: int, body: bytes,
            headers: dict[str, str] | None = None) -> None:
    response = http.Response.make(
        status, body, {"content-type": "text/plain; charset=utf-8", **(headers or {}),
                       "cache-control": "no-store"})
    if flow.request.method == "HEAD":
        # The headers of a GET, no body: mitmproxy would send one after them.
        response.content = b""
        response.headers["content-length"] = str(len(body))
    flow.response = response
