"""Run ``obsmask claude`` / ``obsmask codex`` / ``obsmask run`` as a user
does, and read what it says about the proxy it started.

The command is the package's own (``python -m obsmask_core.cli.main``, what
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
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from support.processes import REPO

OBSMASK = [sys.executable, "-m", "obsmask_core.cli.main"]
START_LINE = re.compile(
    r"obsmask: \S+ through the proxy at http://127\.0\.0\.1:(\d+)\S* \(proxy pid (\d+), "
    r"upstream (\S+?)(, recall on)?; log (\S+)\)")
RUN_TIMEOUT = 120.0
# The launch tests' settings: masking from the first old result on (no
# cache gate: the scripted servers bill by a rough model), recall on with
# its store in the run's folder.
LAUNCH_SETTINGS = """\
[observation_masking.schema1]
window_turns = 1

[recall]
enabled = true
data_dir = "{data_dir}"
"""


def launch_settings(folder: Path) -> Path:
    """The launch tests' settings file, in ``folder`` (recall's store too)."""
    path = folder / "obsmask.toml"
    path.write_text(LAUNCH_SETTINGS.format(data_dir=folder / "recall"), encoding="utf-8")
    return path


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
    """``obsmask ARGUMENTS`` to its end, with no input (after ``timeout``,
    it and its agent are killed as a group, and the proxy by its id)."""
    with RunningObsmask(arguments, cwd, env) as running:
        returncode = running.wait(timeout)  # on a timeout, leaving kills all
        stdout, stderr = running.outputs()
        started = ProxyStarted.read(stderr)
        left_running = stop_left_over(started)
    return LaunchRun(returncode, stdout, stderr, started, left_running)


class RunningObsmask:
    """``obsmask ARGUMENTS`` started in a process group of its own (its
    agent joins it; the proxy has a session of its own), its outputs in
    files; on leaving, whatever is left of the group and the proxy is
    killed by id."""

    def __init__(self, arguments: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="obsmask-run-")
        self._paths = (Path(self._folder.name) / "stdout", Path(self._folder.name) / "stderr")
        # Read back through paths of their own: a file object shared with
        # the child would share its offset, and a read could move its writes.
        with self._paths[0].open("wb") as out, self._paths[1].open("wb") as err:
            self.process = subprocess.Popen(
                [*OBSMASK, *arguments], cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                stdout=out, stderr=err, start_new_session=True)

    def __enter__(self) -> RunningObsmask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self._folder.cleanup()

    def outputs(self) -> tuple[str, str]:
        out, err = (path.read_bytes().decode("utf-8", "replace") for path in self._paths)
        return out, err

    def wait(self, timeout: float) -> int:
        """obsmask's exit status; a failure with its outputs and its proxy's
        log after ``timeout``."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            out, err = self.outputs()
            started = ProxyStarted.read(err)
            log = started.log.read_text(errors="replace")[-3000:] if (
                started and started.log.exists()) else "(no log)"
            raise AssertionError(f"obsmask still running after {timeout:.0f} s\nstdout:\n"
                                 f"{out[-2000:]}\nstderr:\n{err[-3000:]}\nproxy log:\n"
                                 f"{log}") from None

    def proxy_pid(self, timeout: float = 10.0) -> int:
        """The proxy's process id, as soon as obsmask has started it."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = children.read_text().split() if children.exists() else []
            if listed:
                return int(listed[0])
            time.sleep(0.01)
        raise AssertionError("obsmask started no proxy")

    def wait_started(self, timeout: float = 60.0) -> ProxyStarted:
        """What the start line says, once obsmask has printed it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (started := ProxyStarted.read(self.outputs()[1])) is not None:
                return started
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no start line:\n{self.outputs()[1]}")

    def kill(self) -> None:
        """obsmask's group killed, and its proxy if it is still there."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        stop_left_over(ProxyStarted.read(self.outputs()[1]))
