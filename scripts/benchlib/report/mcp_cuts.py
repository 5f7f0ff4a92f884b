"""The MCP answers obsmask cut, as their flows' metadata records them
(``flow.metadata["obsmask_mcp"]``: ``obsmask_core.mcp.summary.McpSummary``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from benchlib.report.flow_file import RecordedMcpCut


def _count(mapping: Mapping[str, object], key: str) -> int | None:
    value = mapping.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
        McpCut(number, cut.flow_number, cut.path, _count(cut.cut, "strings_cut") or 0,
               _count(cut.cut, "chars_before") or 0, _count(cut.cut, "chars_after") or 0,
               _count(cut.cut, "tokens_saved"))
        for number, cut in enumerate(recorded, start=1)
    ]
