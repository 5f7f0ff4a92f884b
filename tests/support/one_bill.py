"""The net bill line that `obsmask report` and `obsmask measure` print for
flow files, read back from what each writes (the commands run as a user
runs them, in ``workdir``, with its mitm.toml)."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from support.processes import REPO

PROXY_BILL = re.compile(r'<p class="lead proxy-bill">[^<]*?gives it: (totals: net bill [^<]*)</p>')
MEASURE_LINE = re.compile(r"^  (totals: net bill .*)$", re.MULTILINE)


def _obsmask(command: str, arguments: Sequence[str], workdir: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "obsmask_core.cli.main", command, *arguments],
        cwd=workdir, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(REPO / "addons"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def report_net_line(flows: Path, workdir: Path, *options: str) -> str:
    page = workdir / "one-bill-report.html"
    _obsmask("report", [str(flows), "-o", str(page), *options], workdir)
    [line] = PROXY_BILL.findall(page.read_text(encoding="utf-8"))
    return html.unescape(line)


def measure_net_line(flows: Path, workdir: Path, *options: str) -> str:
    [line] = MEASURE_LINE.findall(_obsmask("measure", [str(flows), *options], workdir))
    return line
