"""The pause families' figures (``benchlib.cache.pauses``), per line (a model
family under one reading of its cache) and pause family: the mean final
ratio with cold turns and without them, what cold turns take off it, the
share of the saving that comes from cold turns, and the worst bill so far.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from benchlib.cache.family_figures import FamilySessionFigures
from benchlib.cache.figures import round_ratio
from benchlib.cache.pauses import PACED_SECONDS, PAUSE_DISTRIBUTION, PAUSE_FAMILY_NAMES
from benchlib.cache.policies import BASELINE, NO_COLD_TURNS, PAUSE_POLICY, policy_settings
from benchlib.cache.run import PauseRun
from benchlib.cache.summary import ALL, outcomes, summary_json
from benchlib.cache.targets import targets_json
from obsmask_core.conversation.billing.cache_lifetime import CLOCK_MARGIN_SECONDS
from obsmask_core.offline.cache.families import Family
from obsmask_core.offline.cache.model import OPENAI_LIFETIME
from obsmask_core.offline.cache.prompt_blocks import FIVE_MINUTES
from obsmask_core.offline.cache.sessions import Session
from obsmask_core.offline.cache.so_far import FIRST_JUDGED_REQUEST

COLD_SHARE_DEFINITION = (
    "counterfactual: (cost without cold turns - cost with cold turns) / (cost without "
    "masking - cost with cold turns), each cost summed over the line's paused sessions of "
    "the group: the part of what masking with cold turns saves that cold turns bring; above "
    "1 where masking without cold turns costs more than no masking; null where masking with "
    "cold turns saves nothing")
ROW_DESCRIPTION: dict[str, str] = {
    "mean_with_cold_turns": f"mean over the sessions of the final ratio of {PAUSE_POLICY!r} "
                            f"(the shipped settings) to {BASELINE!r}",
    "mean_without_cold_turns": f"the same for {NO_COLD_TURNS!r} (cold_turns = false)",
    "lowered_by_cold_turns": "mean_without_cold_turns - mean_with_cold_turns",
    "share_of_saving_from_cold_turns": COLD_SHARE_DEFINITION,
    "worst_prefix_with_cold_turns": f"max over the sessions, from request "
                                    f"{FIRST_JUDGED_REQUEST} on, of {PAUSE_POLICY!r}'s bill "
                                    f"so far over {BASELINE!r}'s (and its session, request)",
    "worst_prefix_without_cold_turns": f"the same for {NO_COLD_TURNS!r}",
}
GROUP_NAMES = (*PAUSE_FAMILY_NAMES, ALL)


def cold_turn_share(with_cold: float, without_cold: float, unmasked: float) -> float | None:
    """The share of masking's saving (with cold turns) that cold turns
    bring: (without - with) / (unmasked - with); None when masking with cold
    turns saves nothing."""
    saving = unmasked - with_cold
    return (without_cold - with_cold) / saving if saving > 0 else None


def _costs(members: Sequence[FamilySessionFigures], line: str) -> tuple[float, float, float]:
    """(with cold turns, without, no masking): costs summed over ``members``."""
    with_cold = without = unmasked = 0.0
    for session in members:
        by_policy = session["lines"].get(line)
        if by_policy is None:
            continue
        with_cold += by_policy[PAUSE_POLICY]["cost"]
        without += by_policy[NO_COLD_TURNS]["cost"]
        unmasked += by_policy[BASELINE]["cost"]
    return with_cold, without, unmasked


def pause_rows(pauses: PauseRun,
               families: Sequence[Family]) -> dict[str, dict[str, dict[str, object]]]:
    """line -> group (each pause family, and "all") -> its figures."""
    out: dict[str, dict[str, dict[str, object]]] = {}
    with_cold, without = pauses.summary[PAUSE_POLICY], pauses.summary[NO_COLD_TURNS]
    for family in families:
        for line in family.lines():
            rows: dict[str, dict[str, object]] = {}
            for group in GROUP_NAMES:
                if group not in with_cold:
                    continue
                on = with_cold[group].lines.get(line.name)
                off = without[group].lines.get(line.name)
                if on is None or off is None:
                    continue
                members = [s for s in pauses.figures if group == ALL or s["kind"] == group]
                cost_on, cost_off, cost_none = _costs(members, line.name)
                rows[group] = {
                    "sessions": on["sessions"],
                    "mean_with_cold_turns": on["mean"],
                    "mean_without_cold_turns": off["mean"],
                    "lowered_by_cold_turns": round(off["mean"] - on["mean"], 4),
                    "share_of_saving_from_cold_turns": round_ratio(
                        cold_turn_share(cost_on, cost_off, cost_none)),
                    "total_with_cold_turns": on["total"],
                    "total_without_cold_turns": off["total"],
                    "worst_prefix_with_cold_turns": on["worst_prefix"],
                    "worst_prefix_session": on["worst_prefix_session"],
                    "worst_prefix_request": on["worst_prefix_request"],
                    "over_1_03_sessions": on["over_1_03_sessions"],
                    "worst_prefix_without_cold_turns": off["worst_prefix"],
                }
            if rows:
                out[line.name] = rows
    return out


def gap_counts(sessions: Sequence[Session]) -> dict[str, dict[str, object]]:
    """Per pause family, the gaps the run drew: how many, how many past an
    agent's pace, past Anthropic's 5-minute lifetime and its margin (cold
    there), past OpenAI's hour and its margin (cold there too)."""
    anthropic_cold = FIVE_MINUTES + CLOCK_MARGIN_SECONDS
    openai_cold = OPENAI_LIFETIME + CLOCK_MARGIN_SECONDS
    out: dict[str, dict[str, object]] = {}
    for family in PAUSE_FAMILY_NAMES:
        gaps = [after - before for session in sessions if session.kind == family
                for before, after in itertools.pairwise(session.times)]
        if not gaps:
            continue
        long = sum(1 for gap in gaps if gap > PACED_SECONDS[1])
        out[family] = {
            "sessions": sum(1 for session in sessions if session.kind == family),
            "gaps": len(gaps),
            "long_gaps": long,
            "long_gap_share": round(long / len(gaps), 4),
            f"over_{anthropic_cold:g}_s": sum(1 for gap in gaps if gap > anthropic_cold),
            f"over_{openai_cold:g}_s": sum(1 for gap in gaps if gap > openai_cold),
        }
    return out


def pause_json(pauses: PauseRun, families: Sequence[Family]) -> dict[str, object]:
    return {
        "distribution": PAUSE_DISTRIBUTION,
        "drawn": gap_counts(pauses.sessions),
        "requests": pauses.requests,
        "policies": {name: {"source": choice.source,
                            "settings": policy_settings(choice.policy),
                            "outcomes": outcomes(pauses.figures, name)}
                     for name, choice in pauses.policies.items()},
        "figures": ROW_DESCRIPTION,
        "lines": pause_rows(pauses, families),
        "targets": targets_json(pauses.targets, pauses.protocol),
        "information_checks": targets_json(pauses.information),
        "summary": summary_json(pauses.summary),
        "sessions": pauses.figures,
    }


def _cell(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else "-"


def pause_table(pauses: PauseRun, families: Sequence[Family]) -> list[str]:
    """Per pause family and line: the means with and without cold turns,
    what cold turns take off, their share of the saving, the worst bill so
    far (with them; without them beside it)."""
    rows = pause_rows(pauses, families)
    lines = ["| pauses | line | sessions | mean with cold turns | mean without | lowered by "
             "| share of saving from cold turns | worst so far with cold turns "
             "| worst so far without |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for group in GROUP_NAMES[:-1]:
        for line, by_group in rows.items():
            row = by_group.get(group)
            if row is None:
                continue
            session = row["worst_prefix_session"]
            where = (f" ({str(session).removeprefix(group + '/')}, request "
                     f"{row['worst_prefix_request']})" if session else "")
            share = row["share_of_saving_from_cold_turns"]
            lines.append(
                f"| {group} | {line} | {row['sessions']} "
                f"| {_cell(row['mean_with_cold_turns'])}x "
                f"| {_cell(row['mean_without_cold_turns'])}x "
                f"| {_cell(row['lowered_by_cold_turns'])} "
                f"| {f'{share:.0%}' if isinstance(share, float) else '-'} "
                f"| {_cell(row['worst_prefix_with_cold_turns'])}x{where} "
                f"| {_cell(row['worst_prefix_without_cold_turns'])}x |")
    return lines


def drawn_text(pauses: PauseRun) -> str:
    """The gaps the run drew, in one sentence."""
    parts = []
    for family, counts in gap_counts(pauses.sessions).items():
        over = [f"{count} over {key.removeprefix('over_').replace('_', ' ')}"
                for key, count in counts.items() if key.startswith("over_")]
        parts.append(f"{family}: {counts['sessions']} sessions, long gaps "
                     f"{counts['long_gaps']} of {counts['gaps']} ({counts['long_gap_share']:.1%}; "
                     + ", ".join(over) + ")")
    return "; ".join(parts)
