"""mitmproxy's own command-line tools, for the ``obsmask`` command: the
one place it reaches them (``cli/`` imports no mitmproxy)."""

from __future__ import annotations

from collections.abc import Sequence


def run_tool(tool: str, arguments: Sequence[str]) -> int:
    """Run mitmproxy's ``tool`` (``mitmdump`` or ``mitmweb``, the names of
    ``cli/command_line.TOOLS``) as its own console entry point does, with
    ``arguments``; its exit status."""
    from mitmproxy.tools import main

    entries = {"mitmdump": main.mitmdump, "mitmweb": main.mitmweb}
    if tool not in entries:
        raise ValueError(f"{tool}: not a mitmproxy tool obsmask runs")
    return entries[tool](list(arguments)) or 0
