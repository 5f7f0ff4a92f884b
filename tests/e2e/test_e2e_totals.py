"""End to end: the totals of a real run equal the sums of its flows' facts.

A real mitmdump with obsmask, in reverse mode in front of the scripted
Anthropic server (tests/support/scripted_anthropic.py, which reports the
usage a prompt cache would), with price_model "anthropic", writes its flows
with ``-w``. Through it, the real ``anthropic`` SDK agent
(tests/support/anthropic_shell_agent.py) runs two conversations, and the
real ``mcp`` client (tests/clients/mcp_calls.py) calls a log tool whose
answer is cut, through the gateway. Then ``/obsmask/totals`` (JSON) and
``/obsmask/metrics`` (Prometheus) are read from the proxy, and the proxy
is stopped: its summary, the JSON and the metrics are checked against the
sums the test makes itself from the saved flows' metadata. ``mitmdump -nr``
of the saved flows then logs the same summary.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from mitmproxy import http

from support.agents import CLIENTS, CLIENTS_PYTHON, client_env, needs_clients
from support.anthropic_shell_agent import run_shell_agent
from support.flow_files import read_flows
from support.json_values import as_object
from support.mcp_servers import start_mcp_server
from support.metrics_text import exposition_values
from support.processes import REPO, MitmdumpProcess
from support.scripted_anthropic import scripted_anthropic

pytestmark = [pytest.mark.e2e, needs_clients]

Json = dict[str, object]

MARKER = "OBSMASK-E2E-TOTALS"
PROMPTS = (f"{MARKER}: the build fails; run the steps you are given.",
           f"{MARKER}: the tests fail; run the steps you are given.")
FINAL = "Scripted steps done."
SIZES = (12_000, 400, 9_000, 12_000, 700, 12_000, 3_000, 12_000)
OPTIONS = ("--set", "obsmask_price_model=anthropic", "--set", "obsmask_window_turns=1",
           "--set", "obsmask_min_free_percent=80", "--set", "obsmask_allowance_percent=2",
           "--set", "obsmask_totals_input_cents_per_million_tokens=300")
LOG_SERVER = CLIENTS / "log_mcp_server.py"
MCP_CALLS = CLIENTS / "mcp_calls.py"
LOG_LINES = 2000
PROCESS_TIMEOUT = 120
SETTLE_SECONDS = 15.0


@dataclass
class Run:
    flows: list[http.HTTPFlow]
    totals: Json
    metrics: dict[str, float]
    output: str
    replay_output: str


def _get(port: int, path: str) -> bytes:
    # Straight to the proxy, whatever proxy the environment names.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
        body: bytes = answer.read()
        return body


def _mcp_calls(port: int) -> None:
    route = f"http://127.0.0.1:{port}/api/mcp-gateway/logs/rpc"
    plan = [{"url": route, "name": "build_log", "arguments": {"lines": LOG_LINES, "tag": t}}
            for t in ("a", "b")]
    assert CLIENTS_PYTHON is not None
    done = subprocess.run([CLIENTS_PYTHON, str(MCP_CALLS), "--plan", json.dumps(plan)],
                          cwd=REPO, env=client_env(), capture_output=True, text=True,
                          timeout=PROCESS_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    work = tmp_path_factory.mktemp("totals")
    config = work / "empty.toml"
    config.write_text("", encoding="utf-8")
    flows_file = work / "flows.mitm"
    commands = [f"emit {size} step{n}" for n, size in enumerate(SIZES)]
    with ExitStack() as stack:
        scripted = stack.enter_context(scripted_anthropic(MARKER, commands, FINAL))
        server = start_mcp_server(LOG_SERVER, [], "logs", work / "logs.log")
        stack.callback(server.stop)
        server.wait_until_listening()
        proxy = MitmdumpProcess(
            ["--mode", f"reverse:{scripted.url}", "--set", f"obsmask_config={config}",
             "--set", f"mcpmask_gateway_servers=logs={server.url}", "-w", str(flows_file),
             *OPTIONS], REPO, work / "confdir")
        stack.callback(proxy.stop)
        proxy.wait_until_listening()
        assert CLIENTS_PYTHON is not None
        for number, prompt in enumerate(PROMPTS):
            run_shell_agent(CLIENTS_PYTHON, f"http://127.0.0.1:{proxy.port}", prompt,
                            stream_turns=(2, 5) if number == 0 else (), log=proxy.output)
        _mcp_calls(proxy.port)
        # The client's connections close a moment after it exits: wait
        # until the totals stop moving.
        deadline, previous = time.monotonic() + SETTLE_SECONDS, b""
        while True:
            current = _get(proxy.port, "/obsmask/totals")
            if _without_since(current) == _without_since(previous) or (
                    time.monotonic() > deadline):
                break
            previous = current
            time.sleep(1.0)
        totals = json.loads(current)
        metrics = exposition_values(_get(proxy.port, "/obsmask/metrics").decode())
        proxy.stop()
        output = proxy.output()
    replay = subprocess.run(
        [str(Path(proxy.command[0])), "-nr", str(flows_file), "-s", str(REPO / "addons" /
         "obsmask.py"), "--set", f"obsmask_config={config}",
         "--set", f"confdir={work / 'confdir-replay'}", *OPTIONS],
        cwd=REPO, capture_output=True, text=True, timeout=PROCESS_TIMEOUT, check=False)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    yield Run(read_flows(flows_file), totals, metrics, output, replay.stdout + replay.stderr)


def _without_since(document: bytes) -> object:
    return {k: v for k, v in json.loads(document).items() if k != "since"} if document else None


@dataclass
class Sums:
    """What the flows' metadata add up to, summed here apart from the code
    under test."""

    requests: Json
    provider: dict[str, int]
    bill: dict[str, tuple[int, float, float]]
    mcp: Json
    # The ledger's prediction of Anthropic's cache and the provider's
    # report, of the answers that reported it: (input, read, written).
    predicted: tuple[int, int, int]
    reported: tuple[int, int, int]


def _sums(flows: list[http.HTTPFlow]) -> Sums:
    conversation = [as_object(f.metadata["obsmask"]) for f in flows if "obsmask" in f.metadata]
    masked = [m for m in conversation if m["action"] == "masked"]

    def total(facts: list[Json], key: str) -> int:
        return sum(int(str(m.get(key, 0))) for m in facts)

    provider: dict[str, int] = {}
    for m in conversation:
        for key, value in as_object(m.get("provider_usage", {})).items():
            provider[key] = provider.get(key, 0) + int(str(value))
    latest: dict[str, Json] = {}
    for m in conversation:
        if "bill" in m:
            bill = as_object(m["bill"])
            name = str(m["conversation"])
            if name not in latest or int(str(bill["requests"])) >= int(
                    str(latest[name]["requests"])):
                latest[name] = bill
    bill_sums: dict[str, tuple[int, float, float]] = {}
    for bill in latest.values():
        n, w, wo = bill_sums.get(str(bill["price_model"]), (0, 0.0, 0.0))
        bill_sums[str(bill["price_model"])] = (
            n + 1, w + float(str(bill["estimated_with_masking"])),
            wo + float(str(bill["estimated_without_masking"])))
    predicted, reported = [0, 0, 0], [0, 0, 0]
    for m in conversation:
        if "bill" in m and "provider_usage" in m:
            guess = as_object(as_object(m["bill"])["predicted"])
            usage = {k: int(str(v)) for k, v in as_object(m["provider_usage"]).items()}
            read, written = usage["cached_input_tokens"], usage["cache_creation_input_tokens"]
            for sums, figures in ((predicted, [int(str(guess[k])) for k in (
                    "input_tokens", "cache_read_tokens", "cache_write_tokens")]),
                                  (reported, [usage["input_tokens"] + read + written, read,
                                              written])):
                for n, figure in enumerate(figures):
                    sums[n] += figure
    mcp = [as_object(f.metadata["obsmask_mcp"]) for f in flows if "obsmask_mcp" in f.metadata]
    cut = [m for m in mcp if m.get("action") == "truncated"]
    return Sums(
        requests={
            "requests": len(conversation), "masked": len(masked),
            "unchanged": sum(m["action"] == "unchanged" for m in conversation),
            "passed_through": sum(m["action"] == "passed_through" for m in conversation),
            "tool_results_masked": total(masked, "masked_tool_results"),
            "tokens_saved": total(masked, "masked_tokens_before")
            - total(masked, "masked_tokens_after"),
            "tokens_added": sum(max(0, int(str(m["masked_tokens_after"]))
                                    - int(str(m["masked_tokens_before"]))) for m in masked),
            "provider_reports": sum("provider_usage" in m for m in conversation),
        },
        provider=provider, bill=bill_sums,
        mcp={"answers": len(mcp), "answers_truncated": len(cut),
             "strings_cut": total(cut, "strings_cut"), "tokens_saved": total(cut, "tokens_saved")},
        predicted=(predicted[0], predicted[1], predicted[2]),
        reported=(reported[0], reported[1], reported[2]),
    )


def test_the_run_exercised_masking_the_ledger_the_provider_report_and_an_mcp_cut(run: Run):
    """The premise: there is something to add up of every kind."""
    sums = _sums(run.flows)
    assert sums.requests["masked"] >= 4 and sums.requests["unchanged"] >= 2
    assert set(sums.bill) == {"anthropic"} and sums.bill["anthropic"][0] == 2
    assert sums.provider["cached_input_tokens"] > 0
    assert sums.mcp["answers_truncated"] == 2 and sums.mcp["strings_cut"] == 2
    assert "Traceback" not in run.output


def test_the_totals_route_gives_the_sums_of_the_flows_metadata(run: Run):
    sums = _sums(run.flows)
    requests = as_object(run.totals["requests"])
    for key, value in sums.requests.items():
        assert requests[key] == value, key
    assert as_object(requests["provider"]) == {
        key: sums.provider.get(key, 0) for key in as_object(requests["provider"])}
    bill = as_object(as_object(run.totals["bill"])["anthropic"])
    conversations, with_masking, without_masking = sums.bill["anthropic"]
    assert bill["conversations"] == conversations == run.totals["conversations_seen"]
    assert bill["estimated_with_masking"] == pytest.approx(with_masking, abs=0.1)
    assert bill["estimated_without_masking"] == pytest.approx(without_masking, abs=0.1)
    assert bill["estimated_saved_usd"] == pytest.approx(
        (without_masking - with_masking) * 300 / 1e6 / 100, abs=1e-4)
    mcp = as_object(run.totals["mcp"])
    for key, value in sums.mcp.items():
        assert mcp[key] == value, key
    per_conversation = as_object(run.totals["conversations"])
    assert sum(int(str(as_object(c)["requests"])) for c in per_conversation.values()) == (
        sums.requests["requests"])


def test_the_metrics_route_gives_the_same_sums(run: Run):
    sums, m = _sums(run.flows), run.metrics
    assert m['obsmask_conversation_requests_total{action="masked"}'] == sums.requests["masked"]
    assert m['obsmask_conversation_requests_total{action="unchanged"}'] == (
        sums.requests["unchanged"])
    assert m['obsmask_tool_results_total{decision="masked"}'] == (
        sums.requests["tool_results_masked"])
    # Two counters that only grow: their difference is the net figure.
    assert (m['obsmask_tokens_saved_total{feature="conversation"}']
            - m['obsmask_tokens_added_total{feature="conversation"}']) == (
        sums.requests["tokens_saved"])
    assert m['obsmask_tokens_added_total{feature="conversation"}'] == (
        sums.requests["tokens_added"])
    assert m['obsmask_tokens_saved_total{feature="mcp"}'] == sums.mcp["tokens_saved"]
    assert m['obsmask_provider_tokens_total{kind="cached_input"}'] == (
        sums.provider["cached_input_tokens"])
    assert m['obsmask_mcp_strings_cut_total'] == sums.mcp["strings_cut"]
    assert m["obsmask_mask_seconds_count"] == sums.requests["requests"] - (
        sums.requests["passed_through"])
    _, with_masking, _ = sums.bill["anthropic"]
    assert m['obsmask_bill_estimated_tokens{masking="on",price_model="anthropic"}'] == (
        pytest.approx(with_masking, abs=0.1))
    labels = 'cache="breakpoints",format="anthropic"'
    for side, figures in (("predicted", sums.predicted), ("reported", sums.reported)):
        assert tuple(m[f'obsmask_cache_{side}_tokens_total{{{labels},kind="{kind}"}}']
                     for kind in ("input", "cache_read", "cache_write")) == figures, side


@pytest.mark.skipif(sys.platform != "linux", reason="prometheus-client reads them from /proc")
def test_the_metrics_route_also_gives_what_the_proxy_costs_its_host(run: Run):
    """The proxy's own CPU time, memory and garbage collections, beside
    obsmask's figures; and the CPU time the collections took and the
    longest one (a stall of the event loop), timed while the proxy runs."""
    m = run.metrics
    assert m["process_cpu_seconds_total"] > 0
    assert m["process_resident_memory_bytes"] > 10_000_000
    assert m['python_gc_collections_total{generation="0"}'] > 0
    assert m['obsmask_gc_cpu_seconds_total{generation="0"}'] > 0
    assert m['obsmask_gc_longest_pause_seconds{generation="0"}'] > 0


def _summary(output: str) -> list[str]:
    return [re.sub(r"^\[[\d:.]+\] ", "", line) for line in output.splitlines()
            if "obsmask: totals:" in line]


def test_the_summary_at_the_end_of_the_run_states_the_same_sums(run: Run):
    sums = _sums(run.flows)
    lines = _summary(run.output)
    assert lines, run.output[-3000:]
    r = sums.requests
    passed = f", {r['passed_through']:,} passed through" if r["passed_through"] else ""
    assert lines[0].startswith(
        f"obsmask: totals: {r['requests']:,} conversation request(s): {r['masked']:,} masked, "
        f"{r['unchanged']:,} unchanged{passed}; {r['tool_results_masked']:,} tool results "
        f"masked; {r['tokens_saved']:,} input tokens not sent")
    assert any(f"{sums.mcp['strings_cut']:,} string(s))" in line for line in lines)
    # The net figure, in one line beside the tokens not sent, never as them.
    assert lines[1].startswith("obsmask: totals: net bill"), lines
    assert f"{r['tokens_saved']:,} input tokens not sent" in lines[1]
    reports = sums.requests["provider_reports"]
    assert any(line.startswith(f"obsmask: totals: cache predicted vs reported (anthropic, "
                               f"breakpoints; {reports:,} answer(s)): hit rate ")
               and f"input {sums.predicted[0]:,} vs {sums.reported[0]:,} tokens" in line
               for line in lines), lines


def test_mitmdump_nr_of_the_saved_flows_logs_the_same_summary(run: Run):
    """A flow read from a file keeps what obsmask did when it was recorded:
    replaying the run's flows adds up to the run's own summary."""
    assert _summary(run.replay_output) == _summary(run.output)
