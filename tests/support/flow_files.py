"""Flow files (.mitm) written the way mitmdump -w writes them, for the tests
of the scripts that read recorded traffic: a request as the client sent it,
and, for a flow obsmask masked, its backup taken before the body changed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mitmproxy import http, io
from mitmproxy.test import tflow, tutils


def post_flow(path: str, body: bytes, *, masked: bytes | None = None,
              metadata: dict[str, object] | None = None, host: str = "api.example.com",
              method: str = "POST", gzipped: bool = False) -> http.HTTPFlow:
    """A flow of one request to ``path`` with ``body`` (gzip-encoded on the
    wire with ``gzipped``); with ``masked``, a backup is taken and the
    request then carries ``masked``, as obsmask leaves a flow it masked."""
    headers = http.Headers(host=host, content_type="application/json")
    if gzipped:
        headers["content-encoding"] = "gzip"
    request = tutils.treq(host=host, port=443, scheme=b"https", method=method.encode(),
                          path=path.encode(), headers=headers, content=b"")
    request.content = body  # encoded per its content-encoding
    flow = tflow.tflow(req=request, resp=True)
    if masked is not None:
        flow.backup()
        flow.request.content = masked
    if metadata is not None:
        flow.metadata["obsmask"] = metadata
    return flow


def with_unreadable_backup(flow: http.HTTPFlow) -> http.HTTPFlow:
    """``flow`` with a backup that holds no request mitmproxy can read (as
    a backup of another flow format would): the client's original is lost."""
    flow._backup = {"request": {"not": "a request"}}
    return flow


def read_flows(path: Path) -> list[http.HTTPFlow]:
    """The HTTP flows of a flow file, in the file's order."""
    with open(path, "rb") as file:
        return [f for f in io.FlowReader(file).stream() if isinstance(f, http.HTTPFlow)]


def write_flows(path: Path, flows: Sequence[http.HTTPFlow]) -> Path:
    with open(path, "wb") as file:
        writer = io.FlowWriter(file)
        for flow in flows:
            writer.add(flow)
    return path


def original_content(flow: http.HTTPFlow) -> bytes:
    """The request as the client sent it: the flow's backup, if obsmask changed it."""
    copy = flow.copy()
    if copy.modified():
        copy.revert()
    content = copy.request.content
    assert isinstance(content, bytes)
    return content


def flows_in_answer_order(flows: Sequence[http.HTTPFlow], request_ids: Sequence[str],
                          header: str) -> list[http.HTTPFlow]:
    """The flows whose answers carry one of ``request_ids`` in ``header``
    (a scripted server names each answer so), in the order of those ids."""
    numbers = {request_id: number for number, request_id in enumerate(request_ids)}
    found = [
        (numbers[str(f.response.headers.get(header))], f)
        for f in flows
        if f.response is not None and f.response.headers.get(header) in numbers
    ]
    return [f for _, f in sorted(found, key=lambda pair: pair[0])]
