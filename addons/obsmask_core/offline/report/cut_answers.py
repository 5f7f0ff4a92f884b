"""The MCP answers obsmask cut, as their flows' metadata records them
(``flow.metadata["obsmask_mcp"]``: ``obsmask_core.mcp.summary.McpSummary``),
each figure read with ``obsmask_core.shared.read_back.count`` (one that is
no count, or beyond 2**53, is read as absent)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from obsmask_core.offline.report.flow_file import RecordedMcpCut
from obsmask_core.shared.read_back import count
from obsmask_core.shared.request_record import McpKey


@dataclass(frozen=True)
class McpCut:
    number: int  # 1-based, among the cut answers, in the files' order
    flow_number: int
    path: str
    strings_cut: int
    chars_before: int
    chars_after: int
    tokens_saved: int | None  # None: obsmask could not count them (too long, or loading)


def mcp_cuts(recorded: Iterable[RecordedMcpCut]) -> list[McpCut]:
    return [
        McpCut(number, cut.flow_number, cut.path, count(cut.cut.get(McpKey.STRINGS_CUT)) or 0,
               count(cut.cut.get(McpKey.CHARS_BEFORE)) or 0,
               count(cut.cut.get(McpKey.CHARS_AFTER)) or 0,
               count(cut.cut.get(McpKey.TOKENS_SAVED)))
        for number, cut in enumerate(recorded, start=1)
    ]
