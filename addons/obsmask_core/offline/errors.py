"""The one error a benchmark reports and stops on."""

from __future__ import annotations


class BenchError(Exception):
    """Bad input or options: the entry script prints the message and exits
    with status 1."""
