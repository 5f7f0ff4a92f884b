"""scripts/bench_refetch.py on the shared sessions (counts only, no replay):
the baseline of natural repeats and the detections it reports add up."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.processes import REPO

pytestmark = pytest.mark.figures


def test_the_refetch_benchmark_counts_every_repeat_of_the_shared_sessions_once():
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_refetch.py"), "--no-bill"],
        capture_output=True, text=True, timeout=300, check=True)
    report = json.loads(done.stdout)
    total = report["total"]
    assert report["sessions"] == 30  # ten sessions in three wire formats
    assert total["calls"] > 0
    assert total["repeats"] == total["repeats_after_a_change"] \
        + total["repeats_with_nothing_changed"] > 0
    # A detection is a repeat with nothing changed whose result was masked.
    assert total["detections"] <= total["repeats_with_nothing_changed"]
    assert sum(s["repeats"] for s in report["per_session"]) == total["repeats"]
