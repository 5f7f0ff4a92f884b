"""Start real mitmdump processes for the tests, on 127.0.0.1, and stop them."""

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

REPO = Path(__file__).resolve().parents[2]
ADDON = REPO / "addons" / "obsmask.py"
# mitmdump comes with mitmproxy into the venv that runs the tests.
MITMDUMP = str(Path(sys.executable).with_name("mitmdump"))
_LISTENING = re.compile(r"listening at (?:\S+://)?127\.0\.0\.1:(\d+)")
START_TIMEOUT = 60.0


class MitmdumpProcess:
    """A mitmdump with obsmask, its output collected line by line."""

    def __init__(self, arguments: Sequence[str], cwd: Path, confdir: Path) -> None:
        self.command = [
            MITMDUMP,
            "--listen-host",
            "127.0.0.1",
            "-p",
            "0",
            # A fresh confdir: a developer's ~/.mitmproxy/config.yaml must not
            # change what the tests see.
            "--set",
            f"confdir={confdir}",
            "-s",
            str(ADDON),
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
        """The first output line from index ``start`` on that matches ``pattern``."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines[start:]:
                    match = regex.search(line)
                    if match:
                        return match
                remaining = deadline - time.monotonic()
                ended = self.process.poll() is not None and not self._reader.is_alive()
                if remaining <= 0 or ended:
                    raise AssertionError(
                        f"no line matching {pattern!r} in mitmdump's output:\n" + self.output()
                    )
                self._changed.wait(min(remaining, 0.5))

    def wait_until_listening(self) -> int:
        self.port = int(self.wait_for(_LISTENING.pattern, START_TIMEOUT).group(1))
        return self.port

    def wait_for_exit(self, timeout: float = START_TIMEOUT) -> int:
        code = self.process.wait(timeout)
        self._reader.join(5)
        return code

    def output(self) -> str:
        return "\n".join(self.lines)

    def stop(self) -> None:
        stop_process(self.process)
        self._reader.join(5)


def stop_process(process: subprocess.Popen[str]) -> None:
    """Terminate ``process`` (kill it after 10 s) and reap it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@contextmanager
def running_mitmdump(
    arguments: Sequence[str], cwd: Path, confdir: Path
) -> Iterator[MitmdumpProcess]:
    """A listening mitmdump; stopped on exit, whatever happened."""
    proxy = MitmdumpProcess(arguments, cwd, confdir)
    try:
        proxy.wait_until_listening()
        yield proxy
    finally:
        proxy.stop()
