"""Run the real SDK agents of tests/clients/ as processes, in the clients'
virtual environment (OBSMASK_CLIENTS_PYTHON, set by scripts/test.py)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from support.processes import REPO, MitmdumpProcess

CLIENTS_PYTHON = os.environ.get("OBSMASK_CLIENTS_PYTHON")
# The npm agents' folder (Claude Code, Codex), set by scripts/test.py, or why not.
NPM_BIN = os.environ.get("OBSMASK_NPM_AGENTS_BIN")
NPM_PROBLEM = os.environ.get("OBSMASK_NPM_AGENTS_PROBLEM")
AGENT_TIMEOUT = 120.0
CLIENTS = REPO / "tests" / "clients"

needs_clients = pytest.mark.skipif(
    not CLIENTS_PYTHON,
    reason="OBSMASK_CLIENTS_PYTHON is not set (run the tests with scripts/test.py)",
)


def clients_python() -> str:
    """The clients' Python, in a test marked ``needs_clients`` (which skips
    without it)."""
    assert CLIENTS_PYTHON is not None
    return CLIENTS_PYTHON


def npm_agent(program: str, title: str) -> Path:
    """The npm agent ``program`` (``claude``, ``codex``); the test is skipped,
    saying why, without it."""
    if not NPM_BIN:
        problem = NPM_PROBLEM or (
            "OBSMASK_NPM_AGENTS_BIN is not set (run the tests with scripts/test.py)"
        )
        pytest.skip(f"{title} is not installed: {problem}")
    executable = Path(NPM_BIN) / program
    if not executable.exists():
        pytest.skip(f"{title} is not installed: no {executable}")
    return executable


def client_env() -> dict[str, str]:
    """The environment of a client process: no proxy from the environment
    between it and 127.0.0.1."""
    return {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


def run_agent(
    agent: Path,
    base_url: str,
    stub_url: str,
    turns: int,
    stream_turns: tuple[int, ...],
    proxy: MitmdumpProcess,
) -> object:
    """Run an agent to its end; its JSON report, or a failure with both outputs."""
    assert CLIENTS_PYTHON is not None
    command = [
        CLIENTS_PYTHON,
        str(agent),
        "--base-url",
        base_url,
        "--stub-url",
        stub_url,
        "--turns",
        str(turns),
        "--stream-turns",
        ",".join(map(str, stream_turns)),
    ]
    done = subprocess.run(
        command,
        cwd=REPO,
        env=client_env(),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=AGENT_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"the agent failed ({done.returncode}):\n{done.stderr}\n"
            f"mitmdump's output:\n{proxy.output()}"
        )
    return json.loads(done.stdout)


def run_program(
    command: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run a real agent program to its end (bounded by ``timeout``), with no
    input; what it did and how many seconds it took."""
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        encoding="utf-8", errors="replace", timeout=timeout, check=False,
    )
    return done, time.monotonic() - started


CLIENT_TIMEOUT = 60.0


def run_client(command: list[str], proxies: list[MitmdumpProcess]) -> dict[str, Any]:
    """Run a client program of tests/clients (its path, then its arguments)
    under the clients' Python to its end: its JSON report, or a failure
    with its error output and the output of the mitmdumps it went through."""
    assert CLIENTS_PYTHON is not None
    done = subprocess.run(
        [CLIENTS_PYTHON, *command], cwd=REPO, env=client_env(), capture_output=True,
        text=True, encoding="utf-8", timeout=CLIENT_TIMEOUT, check=False,
    )
    if done.returncode != 0:
        outputs = "".join(f"\nmitmdump's output:\n{p.tail(60)}" for p in proxies)
        raise AssertionError(f"{command[0]} failed ({done.returncode}):\n{done.stderr}{outputs}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report
