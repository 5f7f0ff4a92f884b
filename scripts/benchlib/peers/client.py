"""The client side: one keep-alive HTTP/1.1 connection per proxy (as an SDK
keeps one), each recorded body POSTed to the format's route, timed from the
first byte sent to the last byte of the answer."""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from benchlib.peers.wire import ROUTES, headers

REQUEST_TIMEOUT = 300.0


@dataclass(frozen=True)
class Answer:
    status: int  # 0: no HTTP answer at all
    body: bytes
    seconds: float
    error: str = ""


class Client:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._connection: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            self._connection = http.client.HTTPConnection(self._host, self._port,
                                                          timeout=REQUEST_TIMEOUT)
        return self._connection

    def send(self, fmt: str, body: bytes) -> Answer:
        """POST ``body``; a dropped keep-alive connection is opened again once."""
        started = time.perf_counter()
        for attempt in range(2):
            connection = self._connect()
            try:
                connection.request("POST", ROUTES[fmt], body, headers(fmt, len(body)))
                answer = connection.getresponse()
                data = answer.read()
                if answer.will_close:
                    self.close()
                return Answer(answer.status, data, time.perf_counter() - started)
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if attempt:
                    return Answer(0, b"", time.perf_counter() - started, f"{type(e).__name__}: {e}")
                started = time.perf_counter()
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
