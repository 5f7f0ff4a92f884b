"""Run the real Claude Code program (``claude -p``) for the end-to-end tests,
cut off from the network: its only server is the one named by ``base_url``.

scripts/test.py installs the pinned ``@anthropic-ai/claude-code`` into
.venv/agents-node and sets ``OBSMASK_NPM_AGENTS_BIN`` (the folder of the
``claude`` executable), or ``OBSMASK_NPM_AGENTS_PROBLEM`` (why it could not);
without either (plain pytest) the tests that need Claude Code are skipped.

Each run gets a folder of its own, laid out as ``home/`` (``HOME``, with the
configuration in ``home/.claude``, ``CLAUDE_CONFIG_DIR``), ``tmp/``
(``TMPDIR``) and ``work/`` (the working directory). The environment is built
from nothing but ``PATH``: no proxy variable, no credential, no setting of
the developer's. ``HTTP_PROXY`` and ``HTTPS_PROXY`` (which Claude Code
honours) name a trap on 127.0.0.1 that records and refuses every connection,
and ``NO_PROXY`` exempts 127.0.0.1 only: a run reports in ``outside`` any
request that was meant for another host. Claude Code's identity is fixed (the ``userID`` of its
configuration, the session id), so two runs in the same folder send the same
bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import socketserver
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from support.agents import npm_agent, run_program

SESSION_ID = "0b5e55ed-0000-4000-8000-00000000c0de"
USER_ID = "0b5e" * 16
RUN_TIMEOUT = 60.0


def claude_executable() -> Path:
    """The ``claude`` program; the test is skipped, saying why, without it."""
    return npm_agent("claude", "Claude Code")


@dataclass(frozen=True)
class ClaudeRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    # The first bytes of each connection made to the trap (see the module docstring).
    outside: tuple[bytes, ...]

    def result(self) -> dict[str, object]:
        """The ``--output-format json`` report."""
        report = json.loads(self.stdout)
        assert isinstance(report, dict), self.stdout
        return report

    def describe(self) -> str:
        return (
            f"claude exited with {self.returncode}:\n{self.stdout[-3000:]}\n{self.stderr[-3000:]}"
        )


@contextmanager
def network_trap() -> Iterator[tuple[str, list[bytes]]]:
    """A proxy address on 127.0.0.1 that refuses every connection (it reads
    what comes first, keeps it, and hangs up), and the list it keeps."""
    caught: list[bytes] = []
    lock = threading.Lock()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            connection: socket.socket = self.request
            connection.settimeout(1.0)
            try:
                first = connection.recv(4096)
            except OSError:
                first = b""
            with lock:
                caught.append(first or b"(connection with no bytes)")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", caught
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def prepare_folder(root: Path) -> Path:
    """A fresh run folder at ``root`` (removed first if there); its work/."""
    if root.exists():
        shutil.rmtree(root)
    config = root / "home" / ".claude"
    config.mkdir(parents=True)
    (root / "tmp").mkdir()
    (root / "work").mkdir()
    (config / ".claude.json").write_text(json.dumps({"userID": USER_ID}), encoding="utf-8")
    return root / "work"


def run_claude(
    root: Path,
    base_url: str,
    prompt: str,
    arguments: Sequence[str] = (),
    timeout: float = RUN_TIMEOUT,
) -> ClaudeRun:
    """``claude -p PROMPT --output-format json`` in ``root``'s work/ (see
    ``prepare_folder``), talking to ``base_url`` only; ``arguments`` follow."""
    executable = claude_executable()
    with network_trap() as (trap, caught):
        return _run(executable, root, base_url, prompt, arguments, timeout, trap, caught)


def claude_environment(root: Path, base_url: str, trap: str) -> dict[str, str]:
    """Claude Code's environment for a run in ``root`` (see the module
    docstring): its server at ``base_url``, every other host at ``trap``."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "CLAUDE_CONFIG_DIR": str(root / "home" / ".claude"),
        "TMPDIR": str(root / "tmp"),
        "LANG": "C.UTF-8",
        "SHELL": shutil.which("bash") or "/bin/bash",
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "HTTP_PROXY": trap,
        "HTTPS_PROXY": trap,
        "NO_PROXY": "127.0.0.1",
    }


def _run(
    executable: Path,
    root: Path,
    base_url: str,
    prompt: str,
    arguments: Sequence[str],
    timeout: float,
    trap: str,
    caught: list[bytes],
) -> ClaudeRun:
    env = claude_environment(root, base_url, trap)
    command = [
        str(executable),
        "-p",
        prompt,
        "--output-format",
        "json",
        "--session-id",
        SESSION_ID,
        "--no-session-persistence",
        "--strict-mcp-config",
        *arguments,
    ]
    done, seconds = run_program(command, root / "work", env, timeout)
    return ClaudeRun(done.returncode, done.stdout, done.stderr, seconds, tuple(caught))
