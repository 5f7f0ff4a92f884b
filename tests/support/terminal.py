"""A program run on a pseudo-terminal, as a user at a terminal runs it:
what it draws is read back as text (escape sequences removed, spaces
dropped, since a screen lays words out with cursor moves), and keys are
typed into it."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

# Control sequences (CSI, OSC, and the short ESC ones) a terminal program draws with.
_ESCAPES = re.compile(
    rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[78()=>][0-9A-Z]?")
_POLL = 0.1
# The end of what was typed that must show before Enter is pressed.
ECHOED_CHARS = 20


class Terminal:
    """``command`` started on a new pseudo-terminal in ``cwd``."""

    def __init__(self, command: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec or die, never return into pytest
            try:
                os.chdir(cwd)
                os.execve(command[0], list(command), dict(env))
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.raw = b""
        self.status: int | None = None

    def plain(self) -> str:
        """Everything drawn so far, without escapes."""
        return _ESCAPES.sub(b"", self.raw).decode("utf-8", "replace")

    def text(self) -> str:
        """Everything drawn so far, without escapes or spaces."""
        return self.plain().replace(" ", "")

    def _read(self, seconds: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], seconds)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # the program is gone (EIO on Linux)
            return False
        self.raw += data
        return bool(data)

    def wait_for(self, pattern: str, timeout: float) -> bool:
        """Whether ``pattern`` (a regex, matched with spaces dropped)
        appeared within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.text()):
                return True
            if not self._read(_POLL):
                return bool(re.search(pattern, self.text()))
        return False

    def type(self, keys: str, pause: float = 0.5, echo_timeout: float = 10.0) -> None:
        """Type ``keys``, then Enter once the program shows them, and after a
        pause, as a person does: a paste and a return read together (a busy
        machine reads them late) are a new line, not a submit."""
        os.write(self.fd, keys.encode())
        self.wait_for(re.escape(keys.replace(" ", "")[-ECHOED_CHARS:]), echo_timeout)
        time.sleep(pause)
        os.write(self.fd, b"\r")

    def wait_exit(self, timeout: float) -> int | None:
        """The program's exit status once it exits (reading what it still
        draws), or None after ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.status is None and time.monotonic() < deadline:
            self._read(_POLL)
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def close(self) -> None:
        """Kill the program if it still runs, by its id; close the terminal."""
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.status = -signal.SIGKILL
        os.close(self.fd)
