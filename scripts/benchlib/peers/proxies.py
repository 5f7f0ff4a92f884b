"""The proxies under test, each a base URL a client sends to, and the pid
whose CPU time is read; all on 127.0.0.1, started by the bench and stopped
by their own handle.

- ``none``: the client talks to the upstream itself (the reference);
- ``obsmask``: a real mitmdump with obsmask and the shipped settings
  (``mitm.toml`` at the repository's root), in reverse mode to the upstream;
- ``headroom_cache`` and ``headroom_token``: ``headroom proxy`` in its two
  modes (``benchlib.peers.headroom``), or unavailable with the reason.
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from _bootstrap import REPO
from benchlib.mitmdump import MitmdumpError, MitmdumpProcess, stop_process
from benchlib.peers import headroom

SETTINGS = REPO / "mitm.toml"
NONE, OBSMASK = "none", "obsmask"
HEADROOM_NAMES = {mode: f"headroom_{mode}" for mode in headroom.MODES}
PROXY_NAMES = (NONE, OBSMASK, *HEADROOM_NAMES.values())
START_TIMEOUT = 180.0  # Headroom imports a large stack before it listens
_POLL_SECONDS = 0.5


@dataclass
class Proxy:
    """A proxy the bench sends through; ``unavailable`` says why it cannot
    (then nothing is sent through it and no figure is made up for it)."""

    name: str
    url: str = ""
    pid: int | None = None
    version: str = ""
    unavailable: str | None = None


class Running:
    """What must be stopped at the end."""

    def __init__(self) -> None:
        self._mitmdumps: list[MitmdumpProcess] = []
        self._processes: list[subprocess.Popen[str]] = []

    def add_mitmdump(self, process: MitmdumpProcess) -> None:
        self._mitmdumps.append(process)

    def add(self, process: subprocess.Popen[str]) -> None:
        self._processes.append(process)

    def stop(self) -> None:
        for mitmdump in self._mitmdumps:
            mitmdump.stop()
        for process in self._processes:
            stop_process(process)


def no_proxy(upstream: str) -> Proxy:
    return Proxy(NONE, upstream, version="-")


def start_obsmask(upstream: str, work: Path, running: Running, version: str) -> Proxy:
    process = MitmdumpProcess(["--mode", f"reverse:{upstream}",
                               "--set", f"obsmask_config={SETTINGS}"],
                              work, work / "confdir-obsmask")
    running.add_mitmdump(process)
    try:
        port = process.wait_until_listening()
    except MitmdumpError as e:
        return Proxy(OBSMASK, unavailable=f"mitmdump did not start: {e}")
    return Proxy(OBSMASK, f"http://127.0.0.1:{port}", process.process.pid, version)


def _free_port() -> int:
    """A port free on 127.0.0.1 now (Headroom takes no port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _live(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        connection.request("GET", "/livez")
        answer = connection.getresponse()
        answer.read()
        connection.close()
        return answer.status == 200
    except (OSError, http.client.HTTPException):
        return False


def start_headroom(mode: str, upstream: str, work: Path, running: Running) -> Proxy:
    name = HEADROOM_NAMES[mode]
    missing = headroom.missing_reason()
    if missing is not None:
        return Proxy(name, unavailable=missing)
    home = work / f"home-{name}"
    home.mkdir()
    port = _free_port()
    log = home / "headroom.log"
    with log.open("w") as out:
        process = subprocess.Popen(headroom.command(mode, port, upstream), cwd=home,
                                   env=headroom.environment(home), stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.STDOUT, text=True)
    running.add(process)
    deadline = time.monotonic() + START_TIMEOUT
    while not _live(port):
        if process.poll() is not None or time.monotonic() > deadline:
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
            state = (f"exited with code {process.returncode}" if process.poll() is not None
                     else f"not live after {START_TIMEOUT:.0f} s")
            return Proxy(name, unavailable=f"headroom proxy --mode {mode} {state}: {tail}")
        time.sleep(_POLL_SECONDS)
    return Proxy(name, f"http://127.0.0.1:{port}", process.pid, headroom.VERSION)


def headroom_log(work: Path, name: str) -> Path:
    return work / f"home-{name}" / "headroom.log"
