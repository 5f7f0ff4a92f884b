"""The one error the offline tools report and stop on."""

from __future__ import annotations


class OfflineError(Exception):
    """Bad input or options: the command prints the message and exits with
    status 1 (the benchmarks in scripts/ call it BenchError)."""
