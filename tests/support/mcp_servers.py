"""The MCP servers of tests/clients/ (the real ``mcp`` SDK), started as
processes in the clients' Python: each prints ``{"port": N, "path": P}``
once it accepts connections (tests/clients/mcp_serving.py)."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from support.agents import CLIENTS_PYTHON, client_env
from support.processes import REPO, stop_process


@dataclass
class McpServer:
    """One server process, running; ``name`` says which in errors."""

    name: str
    process: subprocess.Popen[str]
    log: Path
    port: int = 0
    path: str = "/mcp"  # /sse for the legacy transport
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def wait_until_listening(self) -> int:
        try:
            first = self.lines.get(timeout=30)
        except queue.Empty:
            first = ""
        if not first.startswith("{"):
            raise AssertionError(
                f"the {self.name} MCP server did not start: {first!r}\n{self.log.read_text()}"
            )
        announced = json.loads(first)
        self.port, self.path = int(announced["port"]), announced["path"]
        return self.port

    def stop(self) -> None:
        stop_process(self.process)


def start_mcp_server(script: Path, arguments: list[str], name: str, log: Path) -> McpServer:
    """Start ``script`` with ``--port 0`` and ``arguments`` (its errors go to
    ``log``); ``wait_until_listening`` gives its port."""
    assert CLIENTS_PYTHON is not None
    command = [CLIENTS_PYTHON, str(script), "--port", "0", *arguments]
    with log.open("w", encoding="utf-8") as errors:
        process = subprocess.Popen(command, cwd=REPO, env=client_env(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=errors, text=True,
                                   encoding="utf-8")
    server = McpServer(name, process, log)

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            server.lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return server
