"""The proxy of one agent run: the ``obsmask`` command's own proxy in a
child process, its output in a log file (the terminal is the agent's),
waited for until it listens, stopped as Ctrl-C stops it, and its
end-of-run summary read back from the log.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from obsmask_core.recall.settings import RECALL_ON_LINE

LOOPBACK = "127.0.0.1"
# mitmproxy's line once the server is up, the port it got included (the
# proxy is started on port 0 unless the user chose one).
LISTENING = re.compile(r"listening at (?:\S+://)?127\.0\.0\.1:(\d+)")
# The lines of the proxy's end-of-run summary (totals/totals.py), and in its
# first line how many conversation requests the proxy saw.
SUMMARY_LINE = re.compile(r"obsmask: totals: .*")
CONVERSATION_REQUESTS = re.compile(r"^obsmask: totals: ([\d,]+) conversation request\(s\)")
# Linux's prctl option that signals a process when its parent dies.
_PR_SET_PDEATHSIG = 1
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
_POLL = 0.05


class ProxyError(RuntimeError):
    """The proxy stopped or did not listen in time; the message ends with
    the tail of its log."""


@dataclass(frozen=True)
class ProxySpec:
    """What the proxy is started with."""

    origin: str
    port: int
    settings: str | None
    log: Path
    # ``NAME=VALUE`` options the agent needs (agents.Agent.proxy_options).
    options: tuple[str, ...] = ()

    def command(self) -> list[str]:
        """The ``obsmask`` command run by this Python: a reverse proxy to
        the upstream, on the loopback."""
        chosen = ["--set", f"obsmask_config={self.settings}"] if self.settings else []
        for option in self.options:
            chosen += ["--set", option]
        return [sys.executable, "-m", "obsmask_core.cli.main", "mitmdump",
                "--mode", f"reverse:{self.origin}", "--listen-host", LOOPBACK,
                "--listen-port", str(self.port), *chosen]


def _dies_with_its_parent() -> Callable[[], None] | None:
    """What the proxy runs before it starts so that it stops (SIGTERM) when
    obsmask is killed without a chance to stop it; None where Linux's prctl
    is not there (the proxy then outlives a killed obsmask)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ProxyProcess:
    """A started proxy; ``outlives_obsmask`` for ``--keep-proxy``."""

    def __init__(self, spec: ProxySpec, *, outlives_obsmask: bool = False) -> None:
        self.spec = spec
        with spec.log.open("wb") as output:
            # A session of its own: Ctrl-C in the terminal is the agent's,
            # and the proxy must outlive it to count the last answer.
            self.process = subprocess.Popen(
                spec.command(), stdin=subprocess.DEVNULL, stdout=output,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=None if outlives_obsmask else _dies_with_its_parent(),
                env={**os.environ, "PYTHONUNBUFFERED": "1"})

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_text(self) -> str:
        try:
            return self.spec.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def wait_listening(self, timeout: float = START_TIMEOUT) -> int:
        """The port the proxy listens on, once it does; ProxyError if it
        exits first or takes longer than ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := LISTENING.search(self.log_text()):
                return int(found.group(1))
            if self.process.poll() is not None:
                raise ProxyError(f"the proxy exited with {self.process.returncode}:\n"
                                 + self.tail())
            time.sleep(_POLL)
        raise ProxyError(f"the proxy was not listening after {timeout:.0f} s:\n" + self.tail())

    def recall_on(self) -> bool:
        """Whether the proxy serves the recall tool (it says so at start-up,
        before it listens)."""
        return RECALL_ON_LINE in self.log_text()

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Stop the proxy as Ctrl-C does (it writes its summary first); killed
        if it takes longer than ``timeout``. Its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def summary(self) -> list[str]:
        """The proxy's end-of-run summary lines, as it logged them."""
        return [found.group(0) for found in SUMMARY_LINE.finditer(self.log_text())]

    def exited(self) -> int | None:
        """The proxy's exit status if it has stopped (on its own, before
        ``stop``: then it did not see the end of the run)."""
        return self.process.poll()

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def conversation_requests(summary: list[str]) -> int | None:
    """How many conversation requests the summary counts (None: no summary)."""
    found = CONVERSATION_REQUESTS.match(summary[0]) if summary else None
    return int(found.group(1).replace(",", "")) if found else None
