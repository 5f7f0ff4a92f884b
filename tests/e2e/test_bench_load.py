"""scripts/bench_load.py --quick: plain mitmproxy and mitmproxy with obsmask
under concurrent clients and faults, through real mitmdump processes. With
obsmask, as without: no error, no wrong byte, no traceback, nothing left
open. And its speed figures (issue 15) are all there and sane; never their
values, which a shared machine's load moves. The run's clients carry on
conversations as agents do (each request the one before with items added),
and the speed phases send bodies obsmask has not seen: none is answered as
a retry. The Claude Code-shaped requests go through both proxies too, in
the mix and in a load phase of their own, as each shape does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.processes import REPO

pytestmark = pytest.mark.e2e

TARGETS = {
    "cpu_per_request_obsmask_over_plain", "requests_per_s_obsmask_over_plain",
    "sse_longest_gap_ms_obsmask", "added_ms_chat_100KB", "added_ms_chat_1.5MB",
    "added_ms_mcp_200k_direct", "added_ms_mcp_200k_gateway", "gateway_over_direct_p50_obsmask",
}
SHAPES = {"chat", "anthropic", "responses", "claude_code"}
NO_LOAD = {"chat 100 KB", "chat 280 KB", "chat 1.5 MB", "chat 10 MB", "mcp 200k direct",
           "mcp 200k gateway"}


@pytest.fixture(scope="module")
def report() -> dict[str, object]:
    """One --quick run for the module's tests (it takes a minute or so)."""
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_load.py"), "--quick"],
        cwd=REPO, capture_output=True, text=True, timeout=240,
    )
    assert result.returncode == 0, result.stderr
    document: dict[str, object] = json.loads(result.stdout)
    return document


def test_load_and_faults_leave_no_error_and_nothing_open(report):
    for variant in ("plain", "obsmask"):
        figures = report[variant]
        summary = {key: figures[key] for key in (
            "errors", "wrong_bodies", "tracebacks", "internal_errors", "left_open",
            "left_open_mitmdump")}
        assert summary == dict.fromkeys(summary, 0), (variant, summary, figures)
        assert figures["load_requests_per_s"] > 0 and figures["rss_kib_after_last_round"] > 0
        assert figures["speed_phases"]["requests"] > 0
    assert report["bodies"] == "agents"
    obsmask = report["obsmask"]
    assert obsmask["load"]["mcp-gateway"]["requests"] > 0
    assert obsmask["load"]["mcp-200k-gateway"]["requests"] > 0
    assert "gateway: upstream silent, client gives up" in obsmask["faults"]
    assert "client gone mid-stream" in report["plain"]["faults"]


def test_obsmask_garbage_collections_are_counted_after_the_rounds(report):
    """Read from obsmask's own metrics after the first and the last round:
    counters per generation, which only grow (plain mitmproxy has none)."""
    first = report["obsmask"]["gc_collections_after_first_round"]
    last = report["obsmask"]["gc_collections_after_last_round"]
    assert set(first) == set(last) == {"0", "1", "2"}
    assert last["0"] > first["0"] > 0
    assert all(last[generation] >= first[generation] for generation in first)
    assert "gc_collections_after_last_round" not in report["plain"]


def test_every_speed_figure_is_there_for_both_proxies_from_the_same_mix(report):
    speed = report["speed"]
    served = report["clients"] * report["per_client"] * report["rounds"]
    for variant in ("plain", "obsmask"):
        figures = speed[variant]
        assert figures["requests"] == served
        assert set(figures["routes"]) == set(report["mix"])
        assert all(route["requests"] > 0 for route in figures["routes"].values())
        for key in ("requests_per_s", "cpu_ms_per_request", "latency_p50_ms", "latency_p99_ms",
                    "gateway_over_direct_p50"):
            assert figures[key] > 0, (variant, key, figures[key])
        assert figures["latency_p99_ms"] >= figures["latency_p50_ms"]
        streams = figures["sse_under_10mb_load"]
        assert len(streams["streams"]) == report["streams"]
        assert all(run["body_ok"] for run in streams["streams"])
        assert streams["longest_gap_ms"] > 0
    # obsmask masked the 10 MB bodies on their way; plain sent them whole.
    plain, obsmask = (speed[v]["sse_under_10mb_load"] for v in ("plain", "obsmask"))
    # (Each fresh body begins with a member of its own: a few bytes more.)
    assert 0 <= plain["10mb_body_bytes_upstream"] - plain["10mb_body_bytes"] < 40
    assert 0 < obsmask["10mb_body_bytes_upstream"] < obsmask["10mb_body_bytes"]
    assert all(value is None or value > 0 for value in speed["ratios"].values())


def test_the_no_load_cases_and_the_targets_say_what_they_measure(report):
    speed = report["speed"]
    assert set(speed["no_load"]) == NO_LOAD
    for case in speed["no_load"].values():
        assert case["requests"] > 0 and case["plain_ms"] > 0 and case["obsmask_ms"] > 0
        assert case["added_ms"] == pytest.approx(case["obsmask_ms"] - case["plain_ms"], abs=0.02)
    assert set(speed["targets"]) == TARGETS
    for target in speed["targets"].values():
        assert set(target) == {"value", "target", "met"} and isinstance(target["met"], bool)
    assert speed["targets_total"] == len(TARGETS)
    assert speed["targets_met"] == sum(t["met"] for t in speed["targets"].values())


def test_each_shape_of_traffic_has_its_own_load_phase_its_ratios_and_its_reuse(report):
    speed = report["speed"]
    assert {"claude-code", "claude-code-sse"} <= set(report["mix"])
    assert report["sessions"]["claude_code"] == report["sessions"]["anthropic"] > 0
    per_shape = speed["per_shape"]
    assert set(per_shape) == SHAPES
    served = report["clients"] * report["shape_per_client"] * report["shape_rounds"]
    for shape, figures in per_shape.items():
        for variant in ("plain", "obsmask"):
            assert figures[variant]["requests"] == served, (shape, variant)
            assert figures[variant]["requests_per_s"] > 0
            assert figures[variant]["cpu_ms_per_request"] > 0
            kinds = report[variant]["shape_phases"]
            assert all(kinds[kind]["requests"] > 0 for kind in figures["kinds"])
        assert all(value > 0 for value in figures["ratios"].values()), shape
        assert set(figures["targets"]) == {"cpu_per_request_obsmask_over_plain",
                                           "requests_per_s_obsmask_over_plain"}
        # obsmask's own metrics account for part of its CPU: its rewrites
        # (every request of a shape is a conversation's) and its collector,
        # whose time is the sum of its generations' (the young one ran).
        parts = figures["obsmask"]["cpu_ms_per_request_by_obsmask_metrics"]
        assert parts["all"] == figures["obsmask"]["cpu_ms_per_request"]
        assert parts["rewrites"] > 0 and parts["garbage_collector"] > 0, shape
        generations = parts["garbage_collector_by_generation"]
        assert set(generations) == {"0", "1", "2"} and generations["0"] > 0, shape
        assert abs(sum(generations.values()) - parts["garbage_collector"]) <= 0.002, shape
        assert "cpu_ms_per_request_by_obsmask_metrics" not in figures["plain"]
        replayed = figures["reuse_replayed"]
        assert replayed["requests"] == sum(replayed["outcomes"].values()) > 0
        assert 0 <= replayed["reused"] <= replayed["masked"] > 0, shape
    # Agents carry on their conversations: obsmask reuses some masked bodies.
    assert per_shape["anthropic"]["reuse_replayed"]["reused"] > 0
