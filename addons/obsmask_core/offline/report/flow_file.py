"""The flows of mitmproxy flow files (.mitm) that the report draws, read
by ``mitm/recorded_flows.py`` (the one reader of flow files, measure's too;
imported when the report reads, so that its other modules load without
mitmproxy): the requests on the conversation routes, each with the body
the client sent and the body that went out, and the MCP answers obsmask
cut.

The method, path and host are the client's (the backup's, as measure reads
them; for a flow obsmask recorded, the same as what went out: it changes
bodies only). A flow obsmask masked whose backup (the client's request) is
missing or cannot be read has no original: it is skipped (neither drawn nor billed)
and listed, as measure skips it, rather than drawn with the masked body as
the client's.

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
from obsmask_core.shared.read_back import word
from obsmask_core.shared.request_record import TRUNCATED, Key, McpKey

if TYPE_CHECKING:
    from obsmask_core.mitm.recorded_flows import RecordedFlow



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
class ReportFlows:
    files: list[str] = field(default_factory=list)
    flows: int = 0  # every flow read, of any kind
    requests: list[RecordedRequest] = field(default_factory=list)
    mcp_cuts: list[RecordedMcpCut] = field(default_factory=list)
    lost_originals: list[LostOriginal] = field(default_factory=list)


def _format(masking: Mapping[str, object], routes: Routes, method: str, path: str,
            host: str) -> WireFormat | None:
    """The format obsmask read the request as (its metadata says), else the
    one its route gives."""
    named = word(masking.get(Key.FORMAT))
    if named is not None and named in FORMATS:
        return FORMATS[named]
    return routes.format_of(method, path, host)


def read_flow_files(paths: Iterable[Path], routes: Routes) -> ReportFlows:
    """Every conversation request and MCP cut of the files, in order;
    OfflineError for a file that cannot be read as flows."""
    from obsmask_core.mitm.recorded_flows import FlowFile, UnreadableFlowFile

    recorded = ReportFlows()
    for path in paths:
        recorded.files.append(str(path))
        file = FlowFile(path)
        read_before = recorded.flows
        try:
            for flow in file.http_flows():
                _add(recorded, flow, read_before + flow.position, path.name, routes)
        except UnreadableFlowFile as e:
            raise OfflineError(str(e)) from e
        recorded.flows = read_before + file.flows_read
    return recorded


def _add(recorded: ReportFlows, flow: RecordedFlow, number: int, source: str,
         routes: Routes) -> None:
    masking, cut = flow.conversation, flow.mcp
    if cut.get(McpKey.ACTION) == TRUNCATED:
        recorded.mcp_cuts.append(RecordedMcpCut(number, source, flow.path, cut))
    fmt = _format(masking, routes, flow.method, flow.path, flow.host)
    if fmt is None:
        return
    if flow.original_lost:
        recorded.lost_originals.append(LostOriginal(number, source, flow.path))
        return
    # Both bodies decoded from their content-encoding; one whose encoding
    # cannot be undone is kept as it is.
    recorded.requests.append(RecordedRequest(
        number, source, flow.path, fmt, flow.client_body_as_recorded, flow.sent_body, masking))
