"""The agent on the terminal, and the signals around it.

While the agent runs, the terminal is the agent's: Ctrl-C and Ctrl-\\ reach
it from the terminal itself (it is in the foreground process group), so
obsmask ignores them; sent to obsmask alone (by an IDE's stop button, a
harness, ``kill -INT``), they are passed on, like SIGTERM and SIGHUP.
Before the agent starts, the same signals end the run: the proxy is
stopped, never left behind. While the proxy stops (a bounded wait), none
of them cuts its summary short.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FrameType

# The shell's statuses for a program that cannot run or is not there.
NOT_EXECUTABLE = 126
NOT_FOUND = 127
SIGNALLED = 128
_FROM_THE_TERMINAL = (signal.SIGINT, signal.SIGQUIT)
_ENDING = (signal.SIGTERM, signal.SIGHUP)
_Handler = Callable[[int, FrameType | None], object] | int | None


class Interrupted(Exception):
    """A signal ended the run before the agent started."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def say(line: str) -> None:
    """One line of obsmask's on stderr (stdout is the agent's)."""
    print(f"obsmask: {line}", file=sys.stderr, flush=True)


@contextmanager
def _handlers(handlers: Mapping[signal.Signals, _Handler]) -> Iterator[None]:
    previous = {number: signal.signal(number, handler) for number, handler in handlers.items()}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextmanager
def signals_end_the_run() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Interrupted (Ctrl-C: KeyboardInterrupt)."""
    with _handlers(dict.fromkeys(_ENDING, _interrupt)):
        yield


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP ignored (the proxy is stopping)."""
    with _handlers(dict.fromkeys((signal.SIGINT, *_ENDING), signal.SIG_IGN)):
        yield


def _terminal_sends_to_the_agent() -> bool:
    """Whether Ctrl-C at the terminal reaches the agent by itself: obsmask
    runs in the terminal's foreground process group."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def run_in_foreground(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``command`` with this terminal until it exits; its status (128 +
    N when signal N ended it)."""
    try:
        process = subprocess.Popen(list(command), env=dict(env))
    except FileNotFoundError:
        say(f"{command[0]}: not found")
        return NOT_FOUND
    except (OSError, ValueError) as e:
        say(f"{command[0]}: cannot be run ({e})")
        return NOT_EXECUTABLE

    def forward(signum: int, frame: FrameType | None) -> None:
        process.send_signal(signum)

    # Set once the agent runs: an ignored signal would be inherited by it.
    terminal = _terminal_sends_to_the_agent()
    handlers: dict[signal.Signals, _Handler] = {
        number: signal.SIG_IGN if terminal else forward for number in _FROM_THE_TERMINAL}
    handlers.update(dict.fromkeys(_ENDING, forward))
    with _handlers(handlers):
        status = process.wait()
    return SIGNALLED - status if status < 0 else status
