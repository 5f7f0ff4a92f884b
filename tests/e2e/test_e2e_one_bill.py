"""End to end: one bill. The proxy's end-of-run summary, `obsmask report` and
`obsmask measure` print the same bill lines for the same flows and the same
settings: the net line (the ledger's bill with obsmask over the bill
without, per price model, and the input tokens not sent), then the bill in
input tokens with and without masking, per price model.

On each saved flow file of fixtures/flows/ (recorded without obsmask), the
proxy is a real mitmdump replaying the file through obsmask (``mitmdump -nr
FILE``, the shipped mitm.toml in its directory), and the report and measure
commands run on the same file in the same directory. The run of the real
Claude Code through a live proxy is tests/e2e/test_e2e_claude_code_report.py.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

from support.one_bill import measure_bill_lines, report_bill_lines, summary_bill_lines
from support.processes import REPO, MitmdumpProcess

pytestmark = pytest.mark.e2e

FLOW_FILES = sorted((REPO / "fixtures" / "flows").glob("*.mitm"))


def proxy_bill_lines(flows: Path, workdir: Path) -> list[str]:
    """The summary's bill lines of a replay of ``flows`` through obsmask."""
    proxy = MitmdumpProcess(["-n", "-r", str(flows)], workdir, workdir / "confdir")
    try:
        assert proxy.wait_for_exit() == 0, proxy.output()
    finally:
        proxy.stop()
    return summary_bill_lines(proxy.output())


@pytest.mark.parametrize("flows", FLOW_FILES, ids=lambda path: path.stem)
def test_the_summary_the_report_and_measure_print_the_same_bill(flows: Path,
                                                                tmp_path: Path) -> None:
    """The same flows under the same settings: one bill, to the last digit."""
    shutil.copyfile(REPO / "mitm.toml", tmp_path / "mitm.toml")
    summary = proxy_bill_lines(flows, tmp_path)
    assert len(summary) == 2, summary  # the net line, one price model's bill
    assert re.search(r"estimated: [0-9.]+× .* under ", summary[0]), summary
    assert re.search(r"bill estimate .*: [0-9,]+ input tokens at base price with masking, "
                     r"[0-9,]+ without", summary[1]), summary
    assert report_bill_lines(flows, tmp_path) == summary
    assert measure_bill_lines(flows, tmp_path) == summary
    assert all(html.unescape(line) == line for line in summary)  # nothing escaped
