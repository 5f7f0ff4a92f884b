"""Values read back from what obsmask saved (flow metadata, a flow file):
each checked for its type, a wrong one read as absent (None). A flow file
may hold anything, and what reads it must not break on it."""

from __future__ import annotations

import math
from collections.abc import Mapping

# Larger figures are not what obsmask writes: a file that holds one is read
# as if it did not (a sum of them would overflow a float in the metrics).
LARGEST = 2**53


def whole(value: object) -> int | None:
    """An int (not a bool) of at most 2**53 either way, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= LARGEST:
        return value
    return None


def count(value: object) -> int | None:
    """A whole number that is a count (not negative), else None."""
    number = whole(value)
    return number if number is not None and number >= 0 else None


def amount(value: object) -> float | None:
    """A finite number that is not negative (int or float, not a bool) of
    at most 2**53, else None."""
    if (isinstance(value, (int, float)) and not isinstance(value, bool)
            and 0 <= value <= LARGEST and math.isfinite(value)):
        return float(value)
    return None


def word(value: object) -> str | None:
    return value if isinstance(value, str) else None


def mapping(value: object) -> Mapping[str, object]:
    """A mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}
