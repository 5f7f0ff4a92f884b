"""The Prometheus text format read back, for the tests of the metrics."""

from __future__ import annotations


def exposition_values(text: str) -> dict[str, float]:
    """Sample lines of the Prometheus text format, by name and labels."""
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values
