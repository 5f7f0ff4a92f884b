"""A Chat Completions request flow for the conversation addon's tests."""

from __future__ import annotations

from mitmproxy.test import tflow, tutils


def chat_flow(content: bytes) -> tflow.HTTPFlow:
    request = tutils.treq(method=b"POST", path=b"/v1/chat/completions", content=content)
    request.headers["content-type"] = "application/json"
    return tflow.tflow(req=request)
