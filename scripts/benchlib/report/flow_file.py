"""The flows of mitmproxy flow files (.mitm) that the report draws, read
with ``mitmproxy.io`` (the one module of the report that imports mitmproxy):
the requests on the conversation routes, each with the body the client sent
and the body that went out, and the MCP answers obsmask cut.

A flow that obsmask masked keeps the client's request in its backup
(mitmproxy's ``flow.backup()``, saved with the flow: what mitmweb's Revert
brings back); its request is the masked body that was forwarded. A flow
without a backup went out as the client sent it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mitmproxy import http, io
from mitmproxy.exceptions import FlowReadException
from mitmproxy.net import encoding

from benchlib.errors import BenchError
from obsmask_core.conversation.routes import Routes
from obsmask_core.conversation.wire_formats import FORMATS, WireFormat
from obsmask_core.mitm.flows import CONVERSATION_METADATA, MCP_METADATA

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


@dataclass
class RecordedFlows:
    files: list[str] = field(default_factory=list)
    flows: int = 0  # every flow read, of any kind
    requests: list[RecordedRequest] = field(default_factory=list)
    mcp_cuts: list[RecordedMcpCut] = field(default_factory=list)


def _metadata(metadata: Mapping[str, object], key: str) -> Mapping[str, object]:
    value = metadata.get(key)
    return value if isinstance(value, dict) else {}


def _format(masking: Mapping[str, object], routes: Routes, method: str, path: str,
            host: str) -> WireFormat | None:
    """The format obsmask read the request as (its metadata says), else the
    one its route gives."""
    named = masking.get("format")
    if isinstance(named, str) and named in FORMATS:
        return FORMATS[named]
    return routes.format_of(method, path, host)


def read_flow_files(paths: Iterable[Path], routes: Routes) -> RecordedFlows:
    """Every conversation request and MCP cut of the files, in order;
    BenchError for a file that cannot be read as flows."""
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
            raise BenchError(f"{path}: cannot be read as mitmproxy flows ({e})") from e
    return recorded


def _add(recorded: RecordedFlows, flow: http.HTTPFlow, source: str, routes: Routes) -> None:
    request = flow.request
    path = request.path.split("?", 1)[0]
    masking = _metadata(flow.metadata, CONVERSATION_METADATA)
    cut = _metadata(flow.metadata, MCP_METADATA)
    if cut.get("action") == MCP_CUT_ACTION:
        recorded.mcp_cuts.append(RecordedMcpCut(recorded.flows, source, path, cut))
    fmt = _format(masking, routes, request.method, path, request.pretty_host)
    if fmt is None:
        return
    sent = request.get_content(strict=False) or b""
    original = _original_body(flow)
    recorded.requests.append(RecordedRequest(
        recorded.flows, source, path, fmt, sent if original is None else original, sent,
        masking))


def _original_body(flow: http.HTTPFlow) -> bytes | None:
    """The request body of the flow's backup (the state before obsmask
    changed it), decoded from any content-encoding; None without a backup.
    The backup is a private attribute of mitmproxy's Flow that holds the
    flow's saved state (the same in mitmproxy 11 and 12); its request is
    read as state, because Request.from_state carries no type annotations."""
    backup = getattr(flow, "_backup", None)
    state = backup.get("request") if isinstance(backup, dict) else None
    if not isinstance(state, dict):
        return None
    content = state.get("content")
    if not isinstance(content, bytes):
        return b""
    coding = next((value for name, value in state.get("headers") or ()
                   if isinstance(name, bytes) and isinstance(value, bytes)
                   and name.lower() == b"content-encoding"), None)
    if not coding:
        return content
    try:
        decoded = encoding.decode(content, coding.decode("latin-1"))
    except ValueError:
        return content  # as get_content(strict=False): the raw bytes
    return decoded if isinstance(decoded, bytes) else content
