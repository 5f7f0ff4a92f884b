"""scripts/bench_peers.py --quick: one short shared session, in each wire
format, through no proxy, a real mitmdump with obsmask's shipped settings
and, where it is installed, Headroom in its two modes, against the bench's
recording upstream. The report has every proxy, the reference bills 1.0x of
itself, obsmask's figures are there and it changes nothing outside tool
results; never the speed figures' values, which a shared machine moves.

The test never installs Headroom (its venv comes only from
``python3 scripts/bench_peers.py --install``): without it, the Headroom
columns say "not installed" and the Headroom test skips, saying so."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchlib.peers.changes import answer_changes, request_changes
from benchlib.peers.proxies import PROXY_NAMES
from obsmask_core.offline.cache.billing import BENCHMARK_NAMES as PRICE_MODEL_NAMES
from support.processes import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.figures]

QUICK_REQUESTS = 3 * 12  # three formats, twelve requests each
HEADROOM = ("headroom_cache", "headroom_token")


@pytest.fixture(scope="module")
def report() -> dict[str, object]:
    """One --quick run for the module's tests."""
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_peers.py"), "--quick"],
        cwd=REPO, capture_output=True, text=True, timeout=420,
    )
    assert result.returncode == 0, result.stderr
    document: dict[str, object] = json.loads(result.stdout)
    return document


def _numbers(bill):
    for model in PRICE_MODEL_NAMES:
        for key in ("final_mean", "final_max", "total", "worst_so_far"):
            assert isinstance(bill[model][key], float | int), (model, key, bill[model])


def test_every_proxy_is_reported_and_the_reference_bills_one(report):
    proxies = report["proxies"]
    assert list(proxies) == list(PROXY_NAMES)
    assert report["requests_per_proxy"] == QUICK_REQUESTS
    assert {name.split("/")[0] for name in report["sessions"]} == {
        "chat", "anthropic", "responses"}
    none = proxies["none"]
    assert none["status"] == "ran" and none["errors"] == 0
    _numbers(none["bill"])
    for model in PRICE_MODEL_NAMES:
        assert none["bill"][model]["final_mean"] == 1.0
        assert none["bill"][model]["worst_so_far"] == 1.0
    assert none["input_tokens"]["ratio"] == 1.0
    assert none["changes"]["requests_compared"] == QUICK_REQUESTS
    assert none["changes"]["requests_changed_outside_tool_results"] == 0
    assert none["cache_instability"]["results_changed"] == 0
    assert none["latency_ms"]["added_median"] == 0.0


def test_obsmask_changes_nothing_outside_tool_results(report):
    """Through a real mitmdump: every request reached the upstream; the
    items, ids, tools, system, members, the client's breakpoints and the
    answers are the client's; what it added is at most one breakpoint per
    request (Anthropic's frontier breakpoint); a result it masked stays
    masked; and its bill, tokens, latency and CPU are numbers."""
    obsmask = report["proxies"]["obsmask"]
    assert obsmask["status"] == "ran", obsmask
    assert obsmask["requests"] == QUICK_REQUESTS
    assert obsmask["errors"] == obsmask["answered_without_upstream"] == 0
    assert obsmask["extra_upstream_requests"] == 0
    changes = obsmask["changes"]
    assert changes["requests_compared"] == QUICK_REQUESTS
    assert changes["requests_changed_outside_tool_results"] == 0, changes["examples"]
    by_category = changes["by_category"]
    assert {k: v for k, v in by_category.items() if k != "breakpoints_added"} == dict.fromkeys(
        (k for k in by_category if k != "breakpoints_added"), 0)
    assert by_category["breakpoints_added"] <= QUICK_REQUESTS // 3  # Anthropic's requests only
    assert all(line.startswith("anthropic/")
               for line in changes["examples"].get("breakpoints_added", []))
    unstable = obsmask["cache_instability"]
    assert unstable["results_changed_more_than_once"] == unstable["results_restored"] == 0
    _numbers(obsmask["bill"])
    assert 0 < obsmask["input_tokens"]["ratio"] <= 1.0
    latency = obsmask["latency_ms"]
    assert latency["p95"] >= latency["median"] > 0
    assert isinstance(latency["added_median"], float)
    assert obsmask["cpu_ms_per_request"] > 0


def test_headroom_runs_offline_in_both_modes_or_is_reported_not_installed(report):
    proxies = report["proxies"]
    missing = [proxies[name] for name in HEADROOM if proxies[name]["status"] != "ran"]
    for figures in missing:
        assert figures["status"] == "unavailable" and figures["reason"]
        assert "bill" not in figures  # no figure is made up
    if missing and all(f["reason"].startswith("not installed") for f in missing):
        pytest.skip(f"Headroom is not installed: {missing[0]['reason']}")
    assert not missing, missing
    for name in HEADROOM:
        figures = proxies[name]
        assert figures["version"] == report["versions"]["headroom"]
        assert figures["requests"] == QUICK_REQUESTS and figures["errors"] == 0
        _numbers(figures["bill"])
        assert figures["latency_ms"]["median"] > 0 and figures["cpu_ms_per_request"] > 0
    assert "--no-telemetry" in report["headroom_offline"]["settings"]
    columns = report["comparison"]
    assert columns and all(isinstance(c["obsmask_ahead_or_level"], bool)
                           for c in columns.values())


def test_the_comparison_sees_each_kind_of_change():
    """The checks above can fail: a tool added or reordered, an id changed,
    a text outside the results, a breakpoint moved, a usage rewritten are
    each seen; a tool result's new value is not a change outside it."""
    sent = {"model": "m", "system": [{"type": "text", "text": "s",
                                       "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "a"}, {"name": "b"}],
            "messages": [{"role": "user", "content": "go"},
                         {"role": "assistant", "content": [
                             {"type": "tool_use", "id": "t1", "name": "a", "input": {}}]},
                         {"role": "user", "content": [
                             {"type": "tool_result", "tool_use_id": "t1", "content": "long"}]}]}
    masked = json.loads(json.dumps(sent))
    masked["messages"][2]["content"][0]["content"] = "[masked]"
    assert request_changes("anthropic", sent, masked) == {}
    changed = json.loads(json.dumps(masked))
    changed["tools"] = [{"name": "b"}, {"name": "a"}, {"name": "retrieve"}]
    changed["messages"][1]["content"][0]["id"] = "t2"
    changed["messages"][0]["content"] = "go on"
    changed["system"][0].pop("cache_control")
    changed["max_tokens"] = 10
    found = request_changes("anthropic", sent, changed)
    assert set(found) == {"tools", "items", "contents", "members",
                          "breakpoints_moved_or_removed"}, found
    assert "retrieve" in found["tools"]
    reordered = json.loads(json.dumps(masked))
    reordered["tools"].reverse()
    assert "reordered" in request_changes("anthropic", sent, reordered)["tools"]
    assert answer_changes({"usage": {"input_tokens": 5}}, {"usage": {"input_tokens": 9}}) == (
        "usage.input_tokens")
    assert answer_changes({"a": 1}, {"a": 1}) is None
