#!/usr/bin/env python3
"""Run obsmask's tests, after installing what they need.

    python3 scripts/test.py [pytest arguments...]

The first run makes the virtual environments: .venv/main-pyX.Y (mitmproxy,
tiktoken, pytest, pytest-xdist, hypothesis, ruff, mypy) where the tests run,
one worker per core and one more;
.venv/clients-pyX.Y (the openai, anthropic and mcp SDKs) for the real
clients and servers that the end-to-end tests start as separate processes;
.venv/agent-mini-pyX.Y (mini-swe-agent) and .venv/agents-node (Claude Code,
from npm, when node is there) for the real agent programs.

OBSMASK_CLIENTS_PYTHON or OBSMASK_MINI_PYTHON set beforehand name the
clients' or mini-swe-agent's python instead, and that venv is not made:
they are programs of their own that speak HTTP to the proxy, so CI's second
pass (.ci/run) runs the first pass's on another Python.
"""

import os
import sys

if sys.version_info < (3, 11):  # noqa: UP036 - the check must run on older Pythons
    sys.exit(f"obsmask needs Python 3.11 or newer; this is Python "
             f"{sys.version_info[0]}.{sys.version_info[1]}")

from concurrent.futures import ThreadPoolExecutor

from _bootstrap import REPO, ensure_npm_agents, ensure_uv, ensure_venv, venv_ready

venvs: dict[str, tuple[str, ...]] = {"main": ("base", "test")}
if not os.environ.get("OBSMASK_CLIENTS_PYTHON"):
    venvs["clients"] = ("e2e-clients",)
if not os.environ.get("OBSMASK_MINI_PYTHON"):
    venvs["agent-mini"] = ("agent-mini",)
# The environments are made side by side: each install mostly waits on
# downloads and on its own bytecode compilation, in processes of its own.
# uv is installed first, once for all of them, when one is to be made.
if not all(venv_ready(name, *groups) for name, groups in venvs.items()):
    ensure_uv()
with ThreadPoolExecutor(len(venvs) + 1) as pool:
    made = {name: pool.submit(ensure_venv, name, *groups) for name, groups in venvs.items()}
    npm = pool.submit(ensure_npm_agents)
    python = made["main"].result()
    if "clients" in made:
        os.environ["OBSMASK_CLIENTS_PYTHON"] = str(made["clients"].result())
    if "agent-mini" in made:
        os.environ["OBSMASK_MINI_PYTHON"] = str(made["agent-mini"].result())
    npm_bin, npm_problem = npm.result()
if npm_bin is not None:
    os.environ["OBSMASK_NPM_AGENTS_BIN"] = str(npm_bin)
else:
    os.environ["OBSMASK_NPM_AGENTS_PROBLEM"] = npm_problem or "unknown"
os.chdir(REPO)
arguments = sys.argv[1:]
# One worker per core and one more, each taking whole modules (their
# module-scoped servers start once), unless told otherwise (-n 0, -p
# no:xdist): the end-to-end tests spend much of their time waiting on the
# servers, proxies and agents they start, and the extra worker fills it.
if not any(a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist"
           for a in arguments):
    arguments = ["-n", str((os.cpu_count() or 1) + 1), "--dist", "loadfile", *arguments]
os.execv(str(python), [str(python), "-m", "pytest", *arguments])
