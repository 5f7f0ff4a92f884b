"""scripts/bench_hooks.py --quick: one client's requests through a real
mitmdump whose obsmask hooks are timed. Every hook that handles a chat
request is in the report, with what goes on inside it; never the values,
which a shared machine's load moves."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.processes import REPO

pytestmark = pytest.mark.e2e


def test_the_report_times_every_hook_of_a_masked_request_and_what_is_inside():
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_hooks.py"), "--quick"],
        cwd=REPO, capture_output=True, text=True, timeout=240,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["size"] == "100 KB" and report["requests"] == 21
    hooks = report["hooks_us"]
    for hook in ("ConversationMasking.request", "ConversationMasking.response",
                 "RunTotals.response", "McpTruncation.response"):
        assert hooks[hook] > 0, hook
    # The most costly first; the sum is theirs.
    assert list(hooks.values()) == sorted(hooks.values(), reverse=True)
    assert report["hooks_sum_us"] == pytest.approx(sum(hooks.values()), abs=0.5)
    inside = report["inside_the_hooks_us"]
    # A next request is masked: its rewrite is timed and its flow backed up.
    assert inside["masking (the summary's mask_ms)"] > 0
    assert inside["flow.backup()"] > 0
    # It is logged (the masked request, the provider's usage), but its lines
    # are handled after the hooks, never while the flow waits.
    assert inside["log records per flow"] == 0 and inside["log records"] == 0
    after = report["after_the_hooks_us"]
    assert after["log records per flow"] >= 1 and after["log records"] > 0
    assert report["next_request_waited_ms"] > 0
