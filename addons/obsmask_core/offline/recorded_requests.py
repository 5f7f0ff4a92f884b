"""The HTTP requests of a mitmproxy flow file (.mitm), as the client sent
them, for the scripts that replay recorded traffic.

A flow recorded through obsmask holds the masked request, which is what
went to the provider; the client's own request is in the flow's backup
(obsmask calls ``flow.backup()`` before it rewrites a body, and mitmproxy
saves the backup with the flow: the "backup" key of its state). Every reader
here takes the backup's request when there is one, so that a session
recorded with masking on replays like one recorded with masking off. A flow
obsmask masked whose backup is missing or cannot be read holds no original:
``original_lost`` says so, and both scripts skip it, saying so, rather than
read the masked body as the client's.

The flows are read by ``mitm/recorded_flows.py``, the one reader of flow
files (the report's too), which reads what obsmask left in a flow's
metadata with ``obsmask_core.shared.read_back``: a flow file may hold
anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from obsmask_core.offline.errors import OfflineError

# Its action on a flow whose request it rewrote (the client's is the backup).
# Why such a flow without its original is skipped, in both scripts' words.
ORIGINAL_LOST = ("masked when recorded, and its original is not in the flow "
                 "(no backup, or one that cannot be read)")


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request of a flow file, as the client sent it."""

    number: int  # its place among the file's HTTP flows, from 1
    method: str
    path: str  # without the query (clients put keys there)
    host: str  # the Host header or the authority asked for (mitmproxy's pretty_host)
    # The body decoded from any content-encoding (empty if none); None when
    # it was not recorded (streamed with stream_large_bodies) or cannot be
    # decoded.
    body: bytes | None
    # The flow has a backup whose request differs from the one that went
    # out: ``body`` is the backup's (the client's), not what was forwarded.
    from_backup: bool
    # What obsmask left in flow.metadata["obsmask"] (action, provider_usage...).
    obsmask: dict[str, object] = field(default_factory=dict)
    # obsmask masked it and its original is not in the flow: ``body`` is
    # the masked one, not the client's.
    original_lost: bool = False
    # When the request that went out started (the time a replay through
    # the proxy plans it at).
    started: float = 0.0
    # obsmask left a record in the flow (``obsmask`` may still be empty).
    recorded_through_obsmask: bool = False


def is_request_body_file(path: Path) -> bool:
    """A JSON document starts with ``{``; a flow file with a length."""
    try:
        with open(path, "rb") as file:
            start = file.read(256).lstrip()
    except OSError as e:
        raise OfflineError(f"{path}: cannot be read ({e.strerror})") from None
    return start.startswith(b"{")


def recorded_requests(path: Path) -> Iterator[RecordedRequest]:
    """Every HTTP request of the file, in the file's order, each as the
    client sent it; OfflineError if the file cannot be read as flows. The
    file is read by mitm/'s reader of recorded flows, imported here so that
    loading offline/ loads no mitmproxy."""
    from obsmask_core.mitm.recorded_flows import FlowFile, UnreadableFlowFile

    try:
        for flow in FlowFile(path).http_flows():
            yield RecordedRequest(
                number=flow.number, method=flow.method, path=flow.path, host=flow.host,
                body=flow.client_body,
                from_backup=flow.from_backup, obsmask=dict(flow.conversation),
                original_lost=flow.original_lost, started=flow.started,
                recorded_through_obsmask=flow.recorded_through_obsmask)
    except UnreadableFlowFile as e:
        raise OfflineError(str(e)) from None


def post_bodies(path: Path) -> Iterator[tuple[str, bytes]]:
    """(route, body) of every HTTP POST in the file, in order: the route is
    the request's path without its query, the body the client's (the
    flow's backup when obsmask masked it), decoded from any
    content-encoding (empty if there is none or it cannot be decoded)."""
    for request in recorded_requests(path):
        if request.method == "POST":
            yield request.path, request.body or b""
