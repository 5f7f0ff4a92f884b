"""The flows of mitmproxy flow files (.mitm) that the report draws, read
with ``mitmproxy.io`` (the one module of the report that imports mitmproxy,
when it reads, so that the report's other modules load without it):
the requests on the conversation routes, each with the body the client sent
and the body that went out, and the MCP answers obsmask cut.

A flow that obsmask masked keeps the client's request in its backup
(mitmproxy's ``flow.backup()``, saved with the flow: what mitmweb's Revert
brings back); its request is the masked body that was forwarded. A flow
without a backup went out as the client sent it. The backup is read by
``obsmask_core.offline.recorded_requests.client_request``, as for measure.py: one reader of it. A
flow obsmask masked whose backup is missing or cannot be read has no
original: it is skipped (neither drawn nor billed) and listed, as measure.py
skips it, rather than drawn with the masked body as the client's.

What obsmask left in a flow's metadata is read with
``obsmask_core.shared.read_back``: a flow file may hold anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from obsmask_core.conversation.settings.routes import Routes
from obsmask_core.conversation.turns.wire_formats import FORMATS, WireFormat
from obsmask_core.offline.errors import OfflineError
from obsmask_core.offline.recorded_requests import client_request, original_lost
from obsmask_core.shared.read_back import mapping, word

if TYPE_CHECKING:
    from mitmproxy import http

# What obsmask_core.mcp.summary.McpSummary.as_metadata says of a cut answer.
MCP_CUT_ACTION = "truncated"


@dataclass(frozen=True)
class RecordedRequest:
    """A POST on a conversation route, as the file holds it."""

    flow_number: int  # 1-based, over every flow of every file, in the files' order
    source: str  # the file's name
    path: str  # without the query (clients may put keys there)
    fmt: WireFormat
    original: bytes  # the body the client sent (the backup's, when obsmask masked it)
    sent: bytes  # the body that went out
    masking: Mapping[str, object]  # flow.metadata["obsmask"], empty when absent


@dataclass(frozen=True)
class RecordedMcpCut:
    """An MCP answer in which obsmask cut long strings."""

    flow_number: int
    source: str
    path: str
    cut: Mapping[str, object]  # flow.metadata["obsmask_mcp"]


@dataclass(frozen=True)
class LostOriginal:
    """A conversation request obsmask masked whose original (the flow's
    backup) is missing or cannot be read: skipped."""

    flow_number: int
    source: str
    path: str


@dataclass
class RecordedFlows:
    files: list[str] = field(default_factory=list)
    flows: int = 0  # every flow read, of any kind
    requests: list[RecordedRequest] = field(default_factory=list)
    mcp_cuts: list[RecordedMcpCut] = field(default_factory=list)
    lost_originals: list[LostOriginal] = field(default_factory=list)


def _metadata(metadata: Mapping[str, object], key: str) -> Mapping[str, object]:
    return mapping(metadata.get(key))


def _format(masking: Mapping[str, object], routes: Routes, method: str, path: str,
            host: str) -> WireFormat | None:
    """The format obsmask read the request as (its metadata says), else the
    one its route gives."""
    named = word(masking.get("format"))
    if named is not None and named in FORMATS:
        return FORMATS[named]
    return routes.format_of(method, path, host)


def read_flow_files(paths: Iterable[Path], routes: Routes) -> RecordedFlows:
    """Every conversation request and MCP cut of the files, in order;
    OfflineError for a file that cannot be read as flows."""
    from mitmproxy import http, io
    from mitmproxy.exceptions import FlowReadException

    recorded = RecordedFlows()
    for path in paths:
        recorded.files.append(str(path))
        try:
            with open(path, "rb") as file:
                for flow in io.FlowReader(file).stream():
                    recorded.flows += 1
                    if isinstance(flow, http.HTTPFlow):
                        _add(recorded, flow, path.name, routes)
        except (OSError, FlowReadException) as e:
            raise OfflineError(f"{path}: cannot be read as mitmproxy flows ({e})") from e
    return recorded


def _add(recorded: RecordedFlows, flow: http.HTTPFlow, source: str, routes: Routes) -> None:
    from obsmask_core.mitm.flows import CONVERSATION_METADATA, MCP_METADATA

    request = flow.request
    path = request.path.split("?", 1)[0]
    masking = _metadata(flow.metadata, CONVERSATION_METADATA)
    cut = _metadata(flow.metadata, MCP_METADATA)
    if cut.get("action") == MCP_CUT_ACTION:
        recorded.mcp_cuts.append(RecordedMcpCut(recorded.flows, source, path, cut))
    fmt = _format(masking, routes, request.method, path, request.pretty_host)
    if fmt is None:
        return
    client = client_request(flow)
    if original_lost(flow, client):
        recorded.lost_originals.append(LostOriginal(recorded.flows, source, path))
        return
    # Both bodies decoded from their content-encoding by mitmproxy; one
    # whose encoding cannot be undone is kept as it is (strict=False).
    sent = request.get_content(strict=False) or b""
    original = sent if client is request else (client.get_content(strict=False) or b"")
    recorded.requests.append(RecordedRequest(
        recorded.flows, source, path, fmt, original, sent, masking))
