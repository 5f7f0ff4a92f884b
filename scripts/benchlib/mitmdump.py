"""A real mitmdump with obsmask loaded, on 127.0.0.1, and its stop.

The one process wrapper of the end-to-end tests (tests/support/processes.py
re-exports it) and of the benchmarks. Every mitmdump listens on 127.0.0.1
only, on a port the system picks, with a confdir of its own; every wait is
bounded (``START_TIMEOUT`` unless told), and a process is stopped by its own
Popen handle: terminated, killed 10 s later if it is still there, and reaped.

Settings: in a folder with no mitm.toml the ``obsmask`` command reads the
recommended settings the package ships; the tests and benchmarks started
here with neither a mitm.toml in ``cwd`` nor an ``obsmask_config`` of their
own run with the built-in defaults instead, by an empty settings file named
explicitly (``builtin_defaults=False`` leaves the choice to obsmask).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from _bootstrap import REPO

ADDON = REPO / "addons" / "obsmask.py"
# mitmdump comes with mitmproxy into the venv of the running Python.
MITMDUMP = str(Path(sys.executable).with_name("mitmdump"))
CONFIG_OPTION = "obsmask_config="
EMPTY_SETTINGS = "obsmask-built-in-defaults.toml"
LISTENING = re.compile(r"listening at (?:\S+://)?127\.0\.0\.1:(\d+)")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
_READER_JOIN_TIMEOUT = 5.0


class MitmdumpError(RuntimeError):
    """mitmdump did not print what was awaited (it exited, or time ran out)."""


class MitmdumpProcess:
    """A mitmdump with obsmask, its output collected line by line.

    ``arguments`` follow obsmask's own options (``--mode reverse:...``,
    ``--set name=value``...); ``confdir`` is a fresh folder, so that a
    developer's ~/.mitmproxy/config.yaml changes nothing."""

    def __init__(self, arguments: Sequence[str], cwd: Path, confdir: Path,
                 addon: Path | None = ADDON, *, builtin_defaults: bool = True) -> None:
        # addon=None: plain mitmproxy, the load benchmark's reference.
        if addon is not None and builtin_defaults:
            arguments = [*arguments, *builtin_defaults_arguments(arguments, cwd, confdir)]
        self.command = [
            MITMDUMP,
            "--listen-host",
            "127.0.0.1",
            "-p",
            "0",
            "--set",
            f"confdir={confdir}",
            *(["-s", str(addon)] if addon is not None else []),
            *arguments,
        ]
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.process = subprocess.Popen(
            self.command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.port = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, pattern: str, timeout: float = 20.0, start: int = 0) -> re.Match[str]:
        """The first output line from index ``start`` on that matches
        ``pattern``; MitmdumpError if mitmdump ends or ``timeout`` seconds
        pass first."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines[start:]:
                    match = regex.search(line)
                    if match:
                        return match
                remaining = deadline - time.monotonic()
                code = self.process.poll()
                if code is not None and not self._reader.is_alive():
                    state = f"exited with code {code}"
                elif remaining <= 0:
                    state = f"still running after {timeout:.0f} s"
                else:
                    self._changed.wait(min(remaining, 0.5))
                    continue
                raise MitmdumpError(
                    f"mitmdump {state} with no line matching {pattern!r} in its output:\n"
                    + self.output()
                )

    def wait_until_listening(self, timeout: float = START_TIMEOUT) -> int:
        """The port mitmdump listens on, once it says so."""
        self.port = int(self.wait_for(LISTENING.pattern, timeout).group(1))
        return self.port

    def wait_for_exit(self, timeout: float = START_TIMEOUT) -> int:
        """mitmdump's exit code (subprocess.TimeoutExpired after ``timeout``)."""
        code = self.process.wait(timeout)
        self._reader.join(_READER_JOIN_TIMEOUT)
        return code

    def output(self) -> str:
        return "\n".join(self.lines)

    def tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the output."""
        return "\n".join(self.lines[-lines:])

    def terminate(self) -> None:
        """Ask mitmdump to stop, without waiting (``stop`` waits): to stop
        several at once."""
        if self.process.poll() is None:
            self.process.terminate()

    def stop(self) -> None:
        stop_process(self.process)
        self._reader.join(_READER_JOIN_TIMEOUT)


def builtin_defaults_arguments(arguments: Sequence[str], cwd: Path,
                               confdir: Path) -> list[str]:
    """``--set obsmask_config=`` an empty file (written in ``confdir``) when
    neither ``arguments`` nor ``cwd`` choose a settings file; else nothing."""
    if any(a.startswith(CONFIG_OPTION) for a in arguments) or (cwd / "mitm.toml").exists():
        return []
    confdir.mkdir(parents=True, exist_ok=True)
    empty = confdir / EMPTY_SETTINGS
    empty.write_text("", encoding="utf-8")
    return ["--set", f"{CONFIG_OPTION}{empty}"]


def stop_process(process: subprocess.Popen[str]) -> None:
    """Terminate ``process`` (kill it after 10 s) and reap it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT)


@contextmanager
def running_mitmdump(
    arguments: Sequence[str], cwd: Path, confdir: Path, *, builtin_defaults: bool = True
) -> Iterator[MitmdumpProcess]:
    """A listening mitmdump; stopped on exit, whatever happened."""
    proxy = MitmdumpProcess(arguments, cwd, confdir, builtin_defaults=builtin_defaults)
    try:
        proxy.wait_until_listening()
        yield proxy
    finally:
        proxy.stop()
