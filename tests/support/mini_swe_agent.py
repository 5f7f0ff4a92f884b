"""Run the real mini-swe-agent program (``mini``) for the end-to-end tests,
cut off from the network: its only server is the one named by ``api_base``.

scripts/test.py installs the pinned ``mini-swe-agent`` into
.venv/agent-mini-pyX.Y and sets ``OBSMASK_MINI_PYTHON`` (that venv's python);
without it (plain pytest) the tests that need mini-swe-agent are skipped.

How it is run: ``mini`` with its default configuration (``mini.yaml``: the
``bash`` tool called through Chat Completions tool calls, each command's
result sent back as a ``role: "tool"`` message holding
``{"returncode": N, "output": ...}``), the model ``openai/<name>`` through
litellm with ``model.model_kwargs.api_base`` pointing at the test's server,
``--yolo`` (no confirmation), ``--exit-immediately`` (no question when the
agent submits), ``--cost-limit 0`` with ``model.cost_tracking=ignore_errors``
(the scripted model has no price: litellm's cost lookup fails, and the cost
counts as 0), and a step limit as a bound. The agent finishes when a command
prints ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` first: the rest of its
output is the submission, in the trajectory (``--output``) with
``exit_status: "Submitted"``.

mini-swe-agent never asks for a stream; ``stream=True`` adds
``stream: true`` and ``stream_options.include_usage`` to ``model_kwargs``
and loads mini_streaming_model.py's model class, which reads the stream.

Each run gets a folder of its own: ``home/`` (``HOME``, with mini-swe-agent's
global configuration in ``home/config``, ``MSWEA_GLOBAL_CONFIG_DIR``, and
``MSWEA_CONFIGURED`` set so that its first-run wizard never asks anything),
``tmp/`` (``TMPDIR``), ``work/`` (the working directory, where the commands
run) and ``trajectory.json``. The environment is built from nothing but
``PATH``: the API key is a dummy, litellm reads its bundled price list
(``LITELLM_LOCAL_MODEL_COST_MAP``) instead of downloading one, a failed
request is not retried, and every proxy variable names a ``NetworkTrap``:
anything that tried to reach a host other than 127.0.0.1 would be recorded
there.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import socketserver
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.agents import run_program
from support.processes import REPO

MINI_PYTHON = os.environ.get("OBSMASK_MINI_PYTHON")
RUN_TIMEOUT = 180.0  # a busy machine's start of the agent alone has taken 40 s
MODEL = "openai/scripted-model"
STREAMING_MODEL_CLASS = "mini_streaming_model.StreamingLitellmModel"
SUPPORT = REPO / "tests" / "support"


def mini_executable() -> Path:
    """The ``mini`` program; the test is skipped, saying why, without it."""
    if not MINI_PYTHON:
        pytest.skip(
            "mini-swe-agent is not installed: OBSMASK_MINI_PYTHON is not set "
            "(run the tests with scripts/test.py)"
        )
    executable = Path(MINI_PYTHON).with_name("mini")
    if not executable.exists():
        pytest.skip(f"mini-swe-agent is not installed: no {executable}")
    return executable


@functools.cache
def litellm_needs_mcp_bypass(python: str) -> bool:
    """Whether the agent's litellm cannot call a model with tools as it is.

    litellm 1.106.x (what pip picks for mini-swe-agent 2.4.6 today) imports
    its MCP gateway, and with it the ``mcp`` package, on every completion
    that has ``tools``; ``mcp`` is not among its requirements, so without it
    every call fails with "No module named 'mcp'". litellm's own switch
    ``_skip_mcp_handler`` (popped from the arguments before the request is
    built: it never reaches the wire) skips that gateway, which only serves
    tools of type "mcp". It is only passed when ``mcp`` is missing."""
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('mcp') is None)"
    done = subprocess.run([python, "-c", probe], capture_output=True, timeout=30, check=False)
    return done.returncode != 0


class NetworkTrap:
    """A TCP listener on 127.0.0.1 that every proxy variable of the agent
    names: it records the first line of each connection (``CONNECT host:443
    HTTP/1.1``, ``GET http://host/...``) and closes it."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        trap = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(5)
                try:
                    line = self.rfile.readline(2048)
                except OSError:
                    line = b""
                trap.attempts.append(line.decode("latin-1").strip() or "(nothing sent)")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


@contextmanager
def network_trap() -> Iterator[NetworkTrap]:
    trap = NetworkTrap()
    trap.start()
    try:
        yield trap
    finally:
        trap.stop()


@dataclass(frozen=True)
class MiniRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    trajectory: dict[str, object]

    def describe(self) -> str:
        return f"mini exited with {self.returncode}:\n{self.stdout[-3000:]}\n{self.stderr[-3000:]}"

    @property
    def info(self) -> dict[str, object]:
        info = self.trajectory.get("info")
        assert isinstance(info, dict), self.describe()
        return info

    @property
    def messages(self) -> list[dict[str, object]]:
        messages = self.trajectory.get("messages")
        assert isinstance(messages, list), self.describe()
        return messages

    def commands(self) -> list[str]:
        """The commands the agent ran, in order (its parsed actions)."""
        out = []
        for message in self.messages:
            extra = message.get("extra")
            if message.get("role") == "assistant" and isinstance(extra, dict):
                out += [action["command"] for action in extra.get("actions", [])]
        return out

    def returncodes(self) -> list[object]:
        """The exit code of each command's result, as the agent recorded it."""
        out = []
        for message in self.messages:
            extra = message.get("extra")
            if message.get("role") == "tool" and isinstance(extra, dict):
                out.append(extra.get("returncode"))
        return out


def prepare_folder(root: Path, files: Mapping[str, str]) -> Path:
    """A fresh run folder at ``root`` (removed first if there) with ``files``
    written in its work/; returns work/."""
    if root.exists():
        shutil.rmtree(root)
    for name in ("home/config", "tmp", "work"):
        (root / name).mkdir(parents=True)
    for name, text in files.items():
        (root / "work" / name).write_text(text, encoding="utf-8")
    return root / "work"


def run_mini(
    executable: Path,
    root: Path,
    api_base: str,
    task: str,
    trap: NetworkTrap,
    *,
    stream: bool = False,
    step_limit: int = 30,
    timeout: float = RUN_TIMEOUT,
) -> MiniRun:
    """Run ``mini`` on ``task`` in ``root``/work to its end (at most
    ``timeout`` seconds: then it is killed and the test fails)."""
    trajectory = root / "trajectory.json"
    configs = [
        "mini.yaml",
        f"model.model_kwargs.api_base={api_base}",
        "model.cost_tracking=ignore_errors",
        f"agent.step_limit={step_limit}",
        "environment.timeout=20",
    ]
    if litellm_needs_mcp_bypass(str(executable.with_name("python"))):
        configs.append("model.model_kwargs._skip_mcp_handler=true")
    extra: list[str] = []
    if stream:
        configs += [
            "model.model_kwargs.stream=true",
            'model.model_kwargs.stream_options={"include_usage": true}',
        ]
        extra = ["--model-class", STREAMING_MODEL_CLASS]
    command = [
        str(executable),
        "--model", MODEL,
        "--task", task,
        "--yolo",
        "--exit-immediately",
        "--cost-limit", "0",
        "--output", str(trajectory),
        *extra,
    ]
    for spec in configs:
        command += ["--config", spec]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "PYTHONIOENCODING": "utf-8",
        "MSWEA_GLOBAL_CONFIG_DIR": str(root / "home" / "config"),
        "MSWEA_CONFIGURED": "true",
        "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
        "OPENAI_API_KEY": "test",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        **{name: trap.url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                       "http_proxy", "https_proxy", "all_proxy")},
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    if stream:
        env["PYTHONPATH"] = str(SUPPORT)
    done, seconds = run_program(command, root / "work", env, timeout)
    loaded: object = {}
    if trajectory.exists():
        loaded = json.loads(trajectory.read_text(encoding="utf-8"))
    return MiniRun(
        done.returncode, done.stdout, done.stderr, seconds,
        loaded if isinstance(loaded, dict) else {},
    )
