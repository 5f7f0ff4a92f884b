#!/usr/bin/env python3
"""Run mitmdump with obsmask loaded, after installing what it needs.

    python3 scripts/proxy.py [mitmdump|mitmweb] [mitmproxy arguments...]

The first run creates .venv/main-pyX.Y with mitmproxy and tiktoken; mitm.toml
is read from the current directory. Every other argument goes to mitmproxy.
"""

import os
import sys

from _bootstrap import REPO, ensure_venv, venv_bin

ensure_venv("main", "base")
arguments = sys.argv[1:]
tool = "mitmdump"
if arguments and arguments[0] in ("mitmdump", "mitmweb"):
    tool = arguments.pop(0)
program = str(venv_bin("main", tool))
os.execv(program, [program, "-s", str(REPO / "addons" / "obsmask.py"), *arguments])
