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

What obsmask left in a flow's metadata is read with
``obsmask_core.shared.read_back``: a flow file may hold anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from obsmask_core.offline.errors import OfflineError
from obsmask_core.shared.read_back import mapping, word

if TYPE_CHECKING:  # mitmproxy is imported when a file is read, not by every benchmark
    from mitmproxy.http import HTTPFlow, Request

# flow.metadata key under which obsmask leaves its per-flow summary
# (obsmask_core.mitm.flows.CONVERSATION_METADATA; that module loads the
# addon's mitmproxy side, which a reader of files does not need).
OBSMASK_METADATA = "obsmask"
# Its action on a flow whose request it rewrote (the client's is the backup).
MASKED = "masked"
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
    # the masked one, not the client's (see ``original_lost``).
    original_lost: bool = False


def client_request(flow: HTTPFlow) -> Request:
    """The flow's request as the client sent it: the backup's when the flow
    has one (obsmask changed the request), else the flow's own, which went
    out unchanged. For every script that replays flows (measure.py through
    ``recorded_requests``, report.py beside the body that went out); the
    backup is read by the addon's own reader, which its content view uses
    too."""
    from obsmask_core.mitm.flows import original_request

    original = original_request(flow)
    return original if original is not None else flow.request


def obsmask_metadata(flow: HTTPFlow) -> dict[str, object]:
    """What obsmask left in ``flow.metadata["obsmask"]``, empty when there
    is nothing (or something else than a mapping)."""
    return dict(mapping(flow.metadata.get(OBSMASK_METADATA)))


def original_lost(flow: HTTPFlow, client: Request) -> bool:
    """obsmask masked the flow (its metadata says so), and ``client`` (what
    ``client_request`` gave) is the masked request itself: the flow has no
    backup, or one that cannot be read. The client's body is then unknown."""
    return (word(obsmask_metadata(flow).get("action")) == MASKED
            and client.raw_content == flow.request.raw_content)


def _as_recorded(flow: HTTPFlow, number: int) -> RecordedRequest:
    request = client_request(flow)
    try:
        body = request.get_content(strict=True) or b"" if request.raw_content is not None else None
    except ValueError:  # an encoding that cannot be undone
        body = None
    return RecordedRequest(
        number=number,
        method=request.method,
        path=request.path.split("?", 1)[0],
        host=request.pretty_host,
        body=body,
        from_backup=request.raw_content != flow.request.raw_content,
        obsmask=obsmask_metadata(flow),
        original_lost=original_lost(flow, request),
    )


def recorded_requests(path: Path) -> Iterator[RecordedRequest]:
    """Every HTTP request of the file, in the file's order, each as the
    client sent it; OfflineError if the file cannot be read as flows."""
    from mitmproxy import exceptions, io
    from mitmproxy.http import HTTPFlow

    try:
        with open(path, "rb") as file:
            flows = (flow for flow in io.FlowReader(file).stream() if isinstance(flow, HTTPFlow))
            for number, flow in enumerate(flows, start=1):
                yield _as_recorded(flow, number)
    except exceptions.FlowReadException as e:
        raise OfflineError(f"{path}: not a mitmproxy flow file ({e})") from None
    except OSError as e:
        raise OfflineError(f"{path}: cannot be read ({e.strerror})") from None


def post_bodies(path: Path) -> Iterator[tuple[str, bytes]]:
    """(route, body) of every HTTP POST in the file, in order: the route is
    the request's path without its query, the body the client's (the
    flow's backup when obsmask masked it), decoded from any
    content-encoding (empty if there is none or it cannot be decoded)."""
    for request in recorded_requests(path):
        if request.method == "POST":
            yield request.path, request.body or b""
