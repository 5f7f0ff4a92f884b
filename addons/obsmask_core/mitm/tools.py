"""mitmproxy's own command-line tools, for the ``obsmask`` command: the
one place it reaches them (``cli/`` imports no mitmproxy)."""

from __future__ import annotations

from collections.abc import Sequence

TOOLS = ("mitmdump", "mitmweb")


def run_tool(tool: str, arguments: Sequence[str]) -> int:
    """Run mitmproxy's ``tool`` (``mitmdump`` or ``mitmweb``) as its own
    console entry point does, with ``arguments``; its exit status."""
    from mitmproxy.tools import main

    entry = main.mitmweb if tool == "mitmweb" else main.mitmdump
    return entry(list(arguments)) or 0
