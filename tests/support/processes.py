"""Start real mitmdump processes for the tests, on 127.0.0.1, and stop them.

The wrapper is the benchmarks' too: it lives in scripts/benchlib/mitmdump.py
(``scripts`` is on the tests' pythonpath), and this module names it for the
tests."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path

from benchlib.mitmdump import (
    ADDON,
    MITMDUMP,
    REPO,
    START_TIMEOUT,
    MitmdumpError,
    MitmdumpProcess,
    running_mitmdump,
    stop_process,
)

__all__ = [
    "ADDON",
    "MITMDUMP",
    "REPO",
    "START_TIMEOUT",
    "MitmdumpError",
    "MitmdumpProcess",
    "recording_arguments",
    "running_mitmdump",
    "stop_process",
]


def recording_arguments(upstream: str, config: Path, flows: Path,
                        settings: Mapping[str, str] | None = None) -> list[str]:
    """mitmdump's arguments for a reverse proxy to ``upstream`` with the
    settings file ``config``, each of ``settings`` set over it
    (``obsmask_NAME=VALUE``), writing the flows to ``flows``."""
    arguments = ["--mode", f"reverse:{upstream}", "--set", f"obsmask_config={config}",
                 "-w", str(flows)]
    for name, value in (settings or {}).items():
        arguments += ["--set", f"obsmask_{name}={value}"]
    return arguments


def wait_for_lines(proxy: MitmdumpProcess, pattern: str, count: int, timeout: float) -> None:
    """Until mitmdump printed ``count`` lines matching ``pattern`` (or time runs out)."""
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while sum(1 for line in list(proxy.lines) if regex.search(line)) < count:
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)
