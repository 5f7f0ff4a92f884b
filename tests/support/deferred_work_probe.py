"""A mitmdump script for tests/e2e/test_e2e_deferred_work.py: obsmask's
``after_this_turn`` from the request and the response hook of each flow
to ``/probe/N``, with work that asks the upstream server whether mitmproxy
had already written the request to it (``/arrived/N``), or the answer to
the client (``/answered/N``). The server waits a while for it; the work
holds the event loop meanwhile, so what was not written before the work
began cannot arrive, and the server records a no."""

from __future__ import annotations

import sys
import urllib.request
from pathlib import Path

from mitmproxy import http

# mitmdump loads this file alone: obsmask on the path first.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "addons"))
from obsmask_core.mitm.flows import after_this_turn

PROBE = "/probe/"
# The upstream server, asked directly whatever the environment says.
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _ask(flow: http.HTTPFlow, question: str) -> None:
    number = flow.request.path.removeprefix(PROBE)
    url = f"http://{flow.request.host}:{flow.request.port}/{question}/{number}"
    with _direct.open(url, timeout=30) as answer:
        answer.read()


class DeferredWorkProbe:
    def request(self, flow: http.HTTPFlow) -> None:
        if flow.request.path.startswith(PROBE):
            after_this_turn(flow, _ask, flow, "arrived")

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.request.path.startswith(PROBE):
            after_this_turn(flow, _ask, flow, "answered")


addons = [DeferredWorkProbe()]
