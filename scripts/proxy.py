#!/usr/bin/env python3
"""Run mitmdump with obsmask loaded, after installing what it needs.

    python3 scripts/proxy.py [mitmdump|mitmweb] [mitmproxy arguments...]
    python3 scripts/proxy.py claude|codex|run|help [arguments...]

The first run creates .venv/main-pyX.Y with mitmproxy and tiktoken; mitm.toml
is read from the current directory. Every other argument goes to mitmproxy.
``claude``, ``codex``, ``run`` and ``help`` are the installed ``obsmask``
command's: an agent run through a proxy of its own (launch/).
"""

import os
import sys

if sys.version_info < (3, 11):  # noqa: UP036 - the check must run on older Pythons
    sys.exit(f"obsmask needs Python 3.11 or newer; this is Python "
             f"{sys.version_info[0]}.{sys.version_info[1]}")

from _bootstrap import REPO, ensure_venv, venv_bin

sys.path.insert(0, str(REPO / "addons"))
from obsmask_core.cli.command_line import LAUNCHERS, listen_host_default, split_tool

ensure_venv("main", "base")
if sys.argv[1:2] and sys.argv[1] in LAUNCHERS:
    python = str(venv_bin("main", "python"))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO / "addons"), os.environ.get("PYTHONPATH")]))
    os.execv(python, [python, "-m", "obsmask_core.cli.main", *sys.argv[1:]])
tool, arguments = split_tool(sys.argv[1:])
program = str(venv_bin("main", tool))
os.execv(program, [program, "-s", str(REPO / "addons" / "obsmask.py"),
                   *listen_host_default(arguments), *arguments])
