"""The ratios of all sessions, gathered per policy, group and line (a model
family under one reading of its cache)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from benchlib.cache.family_figures import FamilySessionFigures
from benchlib.cache.figures import ratio, round_ratio
from benchlib.cache.policies import BASELINE
from obsmask_core.offline.cache.families import LINE_NAMES

SESSION_KINDS = ("real", "claude_code", "synthetic", "adversarial", "cache_edge", "input")
ALL = "all"
# A session whose bill so far goes past this (from FIRST_JUDGED_REQUEST on)
# is named in the summary.
OVER = 1.03


class LineFigures(TypedDict):
    """A policy's ratios over the sessions of a group, under one line."""

    sessions: int
    mean: float
    max: float
    max_session: str
    min: float
    total: float | None  # sum of costs over sum of the baseline's costs
    # The highest bill so far (from request FIRST_JUDGED_REQUEST on) over the
    # sessions, where it happened; None when no session has that many requests.
    worst_prefix: float | None
    worst_prefix_session: str | None
    worst_prefix_request: int | None
    # The sessions whose bill so far goes past OVER, worst first.
    over_1_03: int
    over_1_03_sessions: list[str]


@dataclass
class GroupFigures:
    sessions: int
    lines: dict[str, LineFigures]  # only the lines with a ratio
    # Forwarded bodies of the group's sessions that break Anthropic's
    # breakpoint rules, per kind of error, summed over the lines.
    protocol_errors: dict[str, int] = field(default_factory=dict)

    @property
    def protocol_error_count(self) -> int:
        return sum(self.protocol_errors.values())

    def to_json(self) -> dict[str, object]:
        return {"sessions": self.sessions, "protocol_errors": self.protocol_errors,
                **self.lines}


# policy -> group -> figures. Groups: each kind of session present (real,
# claude_code, synthetic, adversarial, cache_edge, input), "real/<format>"
# for each format of the real sessions, and "all".
Summary = dict[str, dict[str, GroupFigures]]


def session_groups(sessions: list[FamilySessionFigures],
                   kinds: Sequence[str] = SESSION_KINDS) -> dict[str, list[FamilySessionFigures]]:
    """The groups the summary gives, each with its sessions (a group per
    kind of ``kinds``, then "all"); empty ones left out."""
    groups: dict[str, list[FamilySessionFigures]] = {}
    for kind in kinds:
        members = [s for s in sessions if s["kind"] == kind]
        if not members:
            continue
        groups[kind] = members
        if kind == "real":
            for fmt in dict.fromkeys(s["format"] for s in members):
                groups[f"real/{fmt}"] = [s for s in members if s["format"] == fmt]
    groups[ALL] = sessions
    return groups


def _line_figures(members: Sequence[FamilySessionFigures], policy: str,
                  line: str) -> LineFigures | None:
    rows = [s for s in members if line in s["lines"] and policy in s["lines"][line]]
    values = [(value, s["name"]) for s in rows
              if (value := s["lines"][line][policy]["ratio"]) is not None]
    if not values:
        return None
    worst = max(values)
    total = sum(s["lines"][line][policy]["cost"] for s in rows)
    base = sum(s["lines"][line][BASELINE]["cost"] for s in rows)
    so_far = [(figures["worst_prefix_ratio"], s["name"], figures["worst_prefix_request"])
              for s in rows if (figures := s["lines"][line][policy])["worst_prefix_ratio"]
              is not None]
    prefix = max(so_far, key=lambda found: found[0]) if so_far else None
    over = sorted((found for found in so_far if found[0] > OVER), key=lambda f: -f[0])
    return {
        "sessions": len(rows),
        "mean": round(statistics.fmean(v for v, _ in values), 4),
        "max": worst[0], "max_session": worst[1],
        "min": min(values)[0],
        "total": round_ratio(ratio(total, base)),
        "worst_prefix": prefix[0] if prefix else None,
        "worst_prefix_session": prefix[1] if prefix else None,
        "worst_prefix_request": prefix[2] if prefix else None,
        "over_1_03": len(over),
        "over_1_03_sessions": [name for _, name, _ in over],
    }


def aggregates(sessions: list[FamilySessionFigures], policies: Sequence[str],
               lines: Sequence[str] = LINE_NAMES,
               kinds: Sequence[str] = SESSION_KINDS) -> Summary:
    """policy -> group -> line -> mean, max (and its session), total ratio
    (sum of costs over sum of baseline costs), worst bill so far and the
    sessions over 1.03x; a group per kind of ``kinds`` and "all"."""
    groups = session_groups(sessions, kinds)
    out: Summary = {}
    for policy in policies:
        per_group: dict[str, GroupFigures] = {}
        for name, members in groups.items():
            per_line: dict[str, LineFigures] = {}
            for line in lines:
                figures = _line_figures(members, policy, line)
                if figures is not None:
                    per_line[line] = figures
            errors: Counter[str] = Counter()
            for session in members:
                for by_policy in session["lines"].values():
                    if policy in by_policy:
                        errors.update(by_policy[policy]["protocol_errors"])
            per_group[name] = GroupFigures(len(members), per_line, dict(errors))
        out[policy] = per_group
    return out


def outcomes(sessions: list[FamilySessionFigures], policy: str) -> dict[str, dict[str, int]]:
    """family -> the rewrite's outcomes of ``policy`` over the requests of
    the sessions it bills (each family's run once, whatever its readings)."""
    counted: dict[str, Counter[str]] = {}
    for session in sessions:
        families: dict[str, dict[str, int]] = {}
        for line, by_policy in session["lines"].items():
            if policy in by_policy:
                families.setdefault(line.split("/")[0], by_policy[policy]["outcomes"])
        for family, found in families.items():
            counted.setdefault(family, Counter()).update(found)
    return {family: dict(found) for family, found in counted.items()}


def summary_json(summary: Summary) -> dict[str, object]:
    return {policy: {kind: figures.to_json() for kind, figures in groups.items()}
            for policy, groups in summary.items()}
