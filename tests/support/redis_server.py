"""A real ``redis-server`` for the tests: started on 127.0.0.1 on a free
port, with its files in a directory of the test's, and stopped by its pid.

The binary is the one on PATH (Debian: ``apt-get install redis-server``;
``.ci/run`` installs it when it can) or the one ``OBSMASK_REDIS_SERVER``
names; where there is none the tests that need it skip, saying so
(``needs_redis``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from support.processes import stop_process

REDIS_SERVER = os.environ.get("OBSMASK_REDIS_SERVER") or shutil.which("redis-server")
START_TIMEOUT = 10.0

needs_redis = pytest.mark.skipif(
    REDIS_SERVER is None,
    reason="no redis-server on PATH (Debian: apt-get install redis-server; or set "
           "OBSMASK_REDIS_SERVER to its path): the Redis store's tests need a real server",
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process; ``start`` again after ``stop`` brings it
    back on the same port with the same files (append-only file on: what
    it held comes back)."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        assert REDIS_SERVER is not None
        self.directory = directory
        self.port = port or free_port()
        self.process: subprocess.Popen[str] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5.0)

    def start(self) -> None:
        assert REDIS_SERVER is not None and self.process is None
        log = (self.directory / "redis.log").open("a", encoding="utf-8")
        with log:
            self.process = subprocess.Popen(
                [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port),
                 "--dir", str(self.directory), "--appendonly", "yes", "--save", "",
                 "--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, text=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        client = self.client()
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.RedisError:
                    pass
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError(f"redis-server did not start on {self.port}:\n"
                                         f"{(self.directory / 'redis.log').read_text()}")
                time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        """SIGTERM (redis-server writes its append-only file and exits),
        SIGKILL if it does not within the wrapper's time."""
        process, self.process = self.process, None
        if process is not None:
            stop_process(process)


@contextmanager
def running_redis(directory: Path) -> Iterator[RedisServer]:
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()
