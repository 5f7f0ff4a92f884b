"""The ratios of all sessions, gathered per policy, group and price model."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from benchlib.cache.figures import SessionFigures, ratio, round_ratio
from benchlib.cache.policies import BASELINE
from obsmask_core.offline.cache.billing import ALL_BENCHMARK_NAMES

SESSION_KINDS = ("real", "synthetic", "adversarial", "cache_edge", "input")
ALL = "all"


class ModelFigures(TypedDict):
    """A policy's ratios over the sessions of a group, under one price model."""

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


@dataclass
class GroupFigures:
    sessions: int
    models: dict[str, ModelFigures]  # only the models with a ratio
    # Forwarded bodies of the group's sessions that break Anthropic's
    # breakpoint rules, per kind of error (``replay.ProtocolErrors``).
    protocol_errors: dict[str, int] = field(default_factory=dict)
    # The rewrite's outcomes summed over the requests (masked, unchanged,
    # refused, unreadable).
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def protocol_error_count(self) -> int:
        return sum(self.protocol_errors.values())

    def to_json(self) -> dict[str, object]:
        return {"sessions": self.sessions, "protocol_errors": self.protocol_errors,
                "outcomes": self.outcomes, **self.models}


# policy -> group -> figures. Groups: each kind of session present (real,
# synthetic, adversarial, cache_edge, input), "real/<format>" for each
# format of the real sessions, and "all".
Summary = dict[str, dict[str, GroupFigures]]


def session_groups(sessions: list[SessionFigures]) -> dict[str, list[SessionFigures]]:
    """The groups the summary gives, each with its sessions; empty ones left out."""
    groups: dict[str, list[SessionFigures]] = {}
    for kind in SESSION_KINDS:
        members = [s for s in sessions if s["kind"] == kind]
        if not members:
            continue
        groups[kind] = members
        if kind == "real":
            for fmt in dict.fromkeys(s["format"] for s in members):
                groups[f"real/{fmt}"] = [s for s in members if s["format"] == fmt]
    groups[ALL] = sessions
    return groups


def _ratios(sessions: Sequence[SessionFigures], policy: str,
            model: str) -> list[tuple[float, str]]:
    found = []
    for session in sessions:
        value = session["policies"][policy]["ratio"][model]
        if value is not None:
            found.append((value, session["name"]))
    return found


def _worst_prefix(sessions: Sequence[SessionFigures], policy: str,
                  model: str) -> tuple[float, str, int] | None:
    worst: tuple[float, str, int] | None = None
    for session in sessions:
        figures = session["policies"][policy]
        value = figures["worst_prefix_ratio"][model]
        request = figures["worst_prefix_request"][model]
        if value is not None and request is not None and (worst is None or value > worst[0]):
            worst = (value, session["name"], request)
    return worst


def _model_figures(members: Sequence[SessionFigures], policy: str,
                   model: str) -> ModelFigures | None:
    values = _ratios(members, policy, model)
    if not values:
        return None
    worst = max(values)
    total = sum(s["policies"][policy]["cost"][model] for s in members)
    base = sum(s["policies"][BASELINE]["cost"][model] for s in members)
    prefix = _worst_prefix(members, policy, model)
    return {
        "mean": round(statistics.fmean(v for v, _ in values), 4),
        "max": worst[0], "max_session": worst[1],
        "min": min(values)[0],
        "total": round_ratio(ratio(total, base)),
        "worst_prefix": prefix[0] if prefix else None,
        "worst_prefix_session": prefix[1] if prefix else None,
        "worst_prefix_request": prefix[2] if prefix else None,
    }


def aggregates(sessions: list[SessionFigures], policies: Sequence[str]) -> Summary:
    """policy -> group -> price model -> mean, max (and its session), total
    ratio (sum of costs over sum of baseline costs) and worst bill so far."""
    groups = session_groups(sessions)
    out: Summary = {}
    for policy in policies:
        per_group: dict[str, GroupFigures] = {}
        for name, members in groups.items():
            per_model: dict[str, ModelFigures] = {}
            for model in ALL_BENCHMARK_NAMES:
                figures = _model_figures(members, policy, model)
                if figures is not None:
                    per_model[model] = figures
            errors: Counter[str] = Counter()
            outcomes: Counter[str] = Counter()
            for session in members:
                errors.update(session["policies"][policy]["protocol_errors"])
                outcomes.update(session["policies"][policy]["outcomes"])
            per_group[name] = GroupFigures(len(members), per_model, dict(errors),
                                           dict(outcomes))
        out[policy] = per_group
    return out


def summary_json(summary: Summary) -> dict[str, object]:
    return {policy: {kind: figures.to_json() for kind, figures in groups.items()}
            for policy, groups in summary.items()}
