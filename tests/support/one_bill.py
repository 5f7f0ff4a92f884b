"""The proxy's bill lines (its end-of-run summary's net bill line, then a
bill line per price model) that `obsmask report` and `obsmask measure`
print for flow files, read back from what each writes (the commands run as
a user runs them, in ``workdir``, with its mitm.toml)."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from support.processes import REPO

PROXY_BILL = re.compile(r'<p class="lead proxy-bill">[^<]*?gives it: (totals: net bill [^<]*)</p>')
PROXY_BILL_LINE = re.compile(r'<p class="proxy-bill-line">(totals: [^<]*)</p>')
MEASURE_LINES = re.compile(r"^  (totals: (?:net bill|bill estimate) .*)$", re.MULTILINE)
# The summary's lines, in a mitmdump's output.
SUMMARY_LINES = re.compile(r"obsmask: (totals: (?:net bill|bill estimate) .*)$", re.MULTILINE)


def _obsmask(command: str, arguments: Sequence[str], workdir: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "obsmask_core.cli.main", command, *arguments],
        cwd=workdir, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(REPO / "addons"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def report_bill_lines(flows: Path, workdir: Path, *options: str) -> list[str]:
    page = workdir / "one-bill-report.html"
    _obsmask("report", [str(flows), "-o", str(page), *options], workdir)
    text = page.read_text(encoding="utf-8")
    [net] = PROXY_BILL.findall(text)
    return [html.unescape(line) for line in (net, *PROXY_BILL_LINE.findall(text))]


def measure_bill_lines(flows: Path, workdir: Path, *options: str) -> list[str]:
    return MEASURE_LINES.findall(_obsmask("measure", [str(flows), *options], workdir))


def summary_bill_lines(output: str) -> list[str]:
    """The summary's net bill line and bill lines in a mitmdump's output."""
    return SUMMARY_LINES.findall(output)
