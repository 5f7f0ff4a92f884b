"""The command line of the ``obsmask`` command and of ``scripts/proxy.py``:
which mitmproxy tool runs, and the address it listens on.

Pure (no mitmproxy import), so that ``scripts/proxy.py`` can use it before
the virtual environment with mitmproxy exists.
"""

from __future__ import annotations

from collections.abc import Sequence

TOOLS = ("mitmdump", "mitmweb")
# The commands of ``obsmask`` that are not mitmproxy's, which
# ``scripts/proxy.py`` hands to the ``obsmask`` command (cli/main.py).
LAUNCHERS = ("claude", "codex", "run", "help")
LOOPBACK_ARGUMENTS = ("--listen-host", "127.0.0.1")


def split_tool(arguments: Sequence[str]) -> tuple[str, list[str]]:
    """The mitmproxy tool to run (a first argument ``mitmdump`` or
    ``mitmweb``; mitmdump without one) and the arguments that follow it."""
    rest = list(arguments)
    tool = rest.pop(0) if rest and rest[0] in TOOLS else TOOLS[0]
    return tool, rest


def listen_host_default(arguments: Sequence[str]) -> list[str]:
    """``--listen-host 127.0.0.1`` unless the arguments choose the address
    (``--listen-host``, ``--set listen_host=...``): mitmproxy listens on
    every interface by default, and the proxy (its MCP gateway too) would
    serve the whole network."""
    for index, argument in enumerate(arguments):
        if argument == "--listen-host" or argument.startswith("--listen-host="):
            return []
        following = arguments[index + 1] if index + 1 < len(arguments) else ""
        if argument == "--set" and following.startswith("listen_host="):
            return []
        if argument.startswith("--set=listen_host="):
            return []
    return list(LOOPBACK_ARGUMENTS)
