"""A real mitmweb with obsmask, on 127.0.0.1, for the tests that look at
what its web interface shows.

Its web port is picked free here (mitmweb prints the port it was given,
not the one the system chose); on mitmproxy 12, which protects the
interface with a token, a password is set and every URL carries it. The
process is stopped by its own handle (``stop_process``), whatever happens.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from mitmproxy import version

from support.processes import ADDON, MITMDUMP, START_TIMEOUT, stop_process

MITMWEB = str(Path(MITMDUMP).with_name("mitmweb"))
# mitmproxy 12 asks for a token (web_password); 11 has no such option.
NEEDS_TOKEN = int(version.VERSION.split(".")[0]) >= 12


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Mitmweb:
    def __init__(self, web_port: int, token: str, log: Path) -> None:
        self.web_port, self.token, self.log = web_port, token, log

    def url(self, path: str) -> str:
        """The interface's URL for ``path`` (a ``#/...`` fragment too), with
        the token."""
        path, _, fragment = path.partition("#")
        joiner = "&" if "?" in path else "?"
        return (f"http://127.0.0.1:{self.web_port}{path}{joiner}token={self.token}"
                + (f"#{fragment}" if fragment else ""))

    def get_json(self, path: str) -> object:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.url(path), timeout=10) as answer:
            return json.loads(answer.read())

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextmanager
def running_mitmweb(arguments: Sequence[str], cwd: Path, confdir: Path) -> Iterator[Mitmweb]:
    """mitmweb with obsmask and ``arguments``, its interface answering."""
    web_port, token = free_port(), secrets.token_hex(8)
    log = confdir.parent / f"mitmweb-{web_port}.log"
    confdir.mkdir(parents=True, exist_ok=True)
    command = [MITMWEB, "--listen-host", "127.0.0.1", "-p", "0", "--set", f"confdir={confdir}",
               "--set", "web_open_browser=false", "--set", "web_host=127.0.0.1",
               "--set", f"web_port={web_port}",
               *(["--set", f"web_password={token}"] if NEEDS_TOKEN else []),
               "-s", str(ADDON), *arguments]
    with open(log, "wb") as sink:
        process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=sink,
                                   stderr=subprocess.STDOUT, text=True)
    web = Mitmweb(web_port, token, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise AssertionError(f"mitmweb exited ({process.returncode}):\n{web.output()}")
            try:
                web.get_json("/options")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise AssertionError(f"mitmweb did not answer:\n{web.output()}") from None
                time.sleep(0.2)
        yield web
    finally:
        stop_process(process)
