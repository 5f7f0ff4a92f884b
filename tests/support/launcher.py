"""Run ``obsmask claude`` / ``obsmask codex`` / ``obsmask run`` as a user
does, and read what it says about the proxy it started.

The command is the package's own (``python -m obsmask_core.mitm.cli``, what
the installed ``obsmask`` runs) with this checkout's ``addons/`` on the
path. Its first line names the proxy's address and process id; after the
run the proxy must be gone: ``LaunchRun`` says whether it was, and stops
it (by its id) if it was not, so a failing test leaves nothing running.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from support.processes import REPO

OBSMASK = [sys.executable, "-m", "obsmask_core.mitm.cli"]
START_LINE = re.compile(
    r"obsmask: \S+ through the proxy at http://127\.0\.0\.1:(\d+)\S* \(proxy pid (\d+), "
    r"upstream (\S+?)(, recall on)?; log (\S+)\)")
RUN_TIMEOUT = 120.0


def obsmask_environment(base: Mapping[str, str], path_first: str | None = None) -> dict[str, str]:
    """``base`` with this checkout's package importable (and ``path_first``
    in front of ``PATH``: where the agent program is)."""
    env = {**base, "PYTHONPATH": str(REPO / "addons"), "PYTHONUNBUFFERED": "1"}
    if path_first:
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    return env


@dataclass(frozen=True)
class ProxyStarted:
    """What the start line said."""

    port: int
    pid: int
    upstream: str
    recall: bool
    log: Path

    @classmethod
    def read(cls, output: str) -> ProxyStarted | None:
        found = START_LINE.search(output)
        if found is None:
            return None
        return cls(int(found.group(1)), int(found.group(2)), found.group(3),
                   bool(found.group(4)), Path(found.group(5)))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def stop_left_over(started: ProxyStarted | None) -> bool:
    """Whether the proxy was still running (then stopped by its id)."""
    if started is None or not alive(started.pid):
        return False
    os.kill(started.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(started.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


@dataclass(frozen=True)
class LaunchRun:
    returncode: int
    stdout: str
    stderr: str
    started: ProxyStarted | None
    # The proxy was still running after obsmask exited (then stopped).
    proxy_left_running: bool

    def describe(self) -> str:
        log = self.started.log.read_text(errors="replace")[-4000:] if (
            self.started and self.started.log.exists()) else "(no log)"
        return (f"obsmask exited with {self.returncode}\nstdout:\n{self.stdout[-3000:]}\n"
                f"stderr:\n{self.stderr[-3000:]}\nthe proxy's log:\n{log}")

    def obsmask_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("obsmask: ")]


def run_obsmask(arguments: Sequence[str], cwd: Path, env: Mapping[str, str],
                timeout: float = RUN_TIMEOUT) -> LaunchRun:
    """``obsmask ARGUMENTS`` to its end, with no input."""
    try:
        done = subprocess.run(
            [*OBSMASK, *arguments], cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
            capture_output=True, text=True, encoding="utf-8", errors="replace",
            timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        output = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else ""
        stop_left_over(ProxyStarted.read(output))
        raise
    started = ProxyStarted.read(done.stderr)
    return LaunchRun(done.returncode, done.stdout, done.stderr, started,
                     stop_left_over(started))
