"""bench_rewrite's figures: one body's (``BodyFigures``), and the ratios
over orjson of a set of bodies, total time over total time: over all of
them (``ratios``), and per shape of traffic with issue 43's targets
(``per_shape``), each with its value and whether it is met (reported,
never enforced)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, TypedDict


class BodyFigures(TypedDict):
    shape: str  # chat, anthropic, responses, claude_code
    format: str  # the wire format
    bytes: int
    outcome: str  # of the body masked alone
    runs: int
    mask_next_ms: float
    mask_warm_ms: float
    mask_cold_ms: float
    orjson_ms: float
    json_ms: float
    mask_over_orjson: float  # the next request's
    # The next request was made from the previous request's masked body.
    next_reused: bool
    session_requests: int
    session_masked: int  # requests masked in one replay of the session
    session_reused: int  # of those, made from the previous masked body
    session_mask_ms: float
    session_orjson_ms: float
    session_mask_over_orjson: float


Timed = Literal["mask_next_ms", "mask_warm_ms", "mask_cold_ms", "orjson_ms", "json_ms",
                "session_mask_ms", "session_orjson_ms"]
Counted = Literal["session_requests", "session_masked", "session_reused"]

# A first request's target holds for bodies of at least these bytes (a
# small body's fixed costs weigh more against orjson's).
FIRST_SEEN_BYTES = 100_000
# Issue 43: (ratio, at most).
TARGETS: tuple[tuple[str, float], ...] = (
    ("mask_next_over_orjson", 2.0),
    ("session_mask_over_orjson", 2.0),
    ("mask_cold_over_orjson_100kb", 6.0),
    ("mask_warm_over_orjson", 1.2),
)


def _total(rows: Iterable[BodyFigures], key: Timed) -> float:
    return sum(row[key] for row in rows)


def _ratio(rows: list[BodyFigures], over: Timed, under: Timed) -> float | None:
    floor = _total(rows, under)
    return round(_total(rows, over) / floor, 2) if rows and floor else None


def ratios(rows: list[BodyFigures]) -> dict[str, float | None]:
    """Masking over orjson (and json), total time over total time."""
    large = [row for row in rows if row["bytes"] >= FIRST_SEEN_BYTES]
    return {
        "session_mask_over_orjson": _ratio(rows, "session_mask_ms", "session_orjson_ms"),
        "mask_next_over_orjson": _ratio(rows, "mask_next_ms", "orjson_ms"),
        "mask_warm_over_orjson": _ratio(rows, "mask_warm_ms", "orjson_ms"),
        "mask_cold_over_orjson": _ratio(rows, "mask_cold_ms", "orjson_ms"),
        "mask_cold_over_orjson_100kb": _ratio(large, "mask_cold_ms", "orjson_ms"),
        "mask_warm_over_json": _ratio(rows, "mask_warm_ms", "json_ms"),
        "worst_body_mask_over_orjson": max((row["mask_over_orjson"] for row in rows),
                                           default=None),
    }


def targets(figures: Mapping[str, float | None]) -> dict[str, dict[str, object]]:
    """Issue 43's targets, each with its value and whether it is met."""
    return {name: {"value": figures.get(name), "target": f"<= {limit:g}",
                   "met": (value := figures.get(name)) is not None and value <= limit}
            for name, limit in TARGETS}


def _count(rows: Iterable[BodyFigures], key: Counted) -> int:
    return sum(row[key] for row in rows)


def shape_summary(rows: list[BodyFigures]) -> dict[str, object]:
    """One shape's bodies: their ratios, how often the previous request's
    masked body was reused, and the targets."""
    figures = ratios(rows)
    met = targets(figures)
    return {
        "bodies": len(rows),
        "bytes_min": min((row["bytes"] for row in rows), default=0),
        "bytes_max": max((row["bytes"] for row in rows), default=0),
        "bodies_100kb": sum(row["bytes"] >= FIRST_SEEN_BYTES for row in rows),
        **figures,
        "next_reused": sum(row["next_reused"] for row in rows),
        "session_requests": _count(rows, "session_requests"),
        "session_masked": _count(rows, "session_masked"),
        "session_reused": _count(rows, "session_reused"),
        "targets": met,
        "targets_met": sum(bool(target["met"]) for target in met.values()),
        "targets_total": len(met),
    }


def per_shape(rows: Iterable[BodyFigures]) -> dict[str, dict[str, object]]:
    """``shape_summary`` for each shape, in the order the bodies come."""
    shapes: dict[str, list[BodyFigures]] = {}
    for row in rows:
        shapes.setdefault(row["shape"], []).append(row)
    return {shape: shape_summary(group) for shape, group in shapes.items()}
