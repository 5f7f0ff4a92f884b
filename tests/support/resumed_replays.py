"""What the tests of resumed replays share: a history the client edited, and
the check that a replay resumed from a checkpoint planned exactly what a
full replay plans."""

from __future__ import annotations

import copy

from obsmask_core.conversation.planning.planner import MaskPlan


def same_plan(resumed: MaskPlan, full: MaskPlan) -> None:
    assert resumed.frontier_turn == full.frontier_turn
    assert resumed.decisions == full.decisions
    assert resumed.kept == full.kept
    assert resumed.kept_at == full.kept_at
    assert resumed.bill == full.bill
    assert resumed.stage == full.stage
    assert resumed.refetches == full.refetches


def edited(items: list[object], at: int) -> list[object]:
    """The items with one string value of item ``at`` changed (a client
    that rewrote its history)."""
    changed = copy.deepcopy(items)
    item = changed[at]
    if isinstance(item, dict):
        for key, value in item.items():
            if isinstance(value, str):
                item[key] = value + " (edited)"
                break
        else:
            item["edited"] = "yes"
    return changed
