"""The addon of the load benchmark's ``plain`` mitmdump (``-s``): it streams
every event stream (``text/event-stream``) instead of holding it until it
ends, as obsmask streams the event streams of its routes, so that plain
mitmproxy and obsmask are compared streaming the same answers. Nothing
else: plain mitmproxy's cost stays mitmproxy's."""

from __future__ import annotations

from mitmproxy import http


def responseheaders(flow: http.HTTPFlow) -> None:
    response = flow.response
    if response is not None and response.headers.get("content-type", "").startswith(
            "text/event-stream"):
        response.stream = True
