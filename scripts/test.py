#!/usr/bin/env python3
"""Run obsmask's tests, after installing what they need.

    python3 scripts/test.py [pytest arguments...]

Two virtual environments are made on the first run: .venv/main-pyX.Y
(mitmproxy, tiktoken, pytest, hypothesis, ruff) where the tests run, and
.venv/clients-pyX.Y (the openai, anthropic and mcp SDKs) for the real clients
and servers that the end-to-end tests start as separate processes.
"""

import os
import sys

from _bootstrap import REPO, ensure_venv

python = ensure_venv("main", "base", "test")
clients = ensure_venv("clients", "e2e-clients")
os.environ["OBSMASK_CLIENTS_PYTHON"] = str(clients)
os.chdir(REPO)
os.execv(str(python), [str(python), "-m", "pytest", *sys.argv[1:]])
