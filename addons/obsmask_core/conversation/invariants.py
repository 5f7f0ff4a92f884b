"""The rules a rewritten conversation must keep, checked after every rewrite.

No item is added, removed or reordered, and nothing changes but the planned
results' values: no id, no call, no block, no other field. A body that
breaks one of them is never sent; the original goes instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from obsmask_core.conversation.planner import MaskPlan
from obsmask_core.conversation.turn_model import Location
from obsmask_core.conversation.wire_formats import WireFormat, set_at


def check_only_planned_changes(
    before: Sequence[object], after: list[object], plan: MaskPlan, fmt: WireFormat
) -> list[str]:
    """The rules of masking for any format: the same number of items
    in the same order, and nothing changed but the planned results' values
    (so no id, call, block or other field). One line per violation."""
    if len(before) != len(after):
        return [f"item count changed from {len(before)} to {len(after)}"]
    planned: dict[int, list[Location]] = {}
    for decision in plan.decisions:
        planned.setdefault(decision.location[0], []).append(decision.location)
    problems = []
    for position, (old, new) in enumerate(zip(before, after, strict=True)):
        if position not in planned:
            if old != new:
                problems.append(f"item {position} changed but was not planned to")
            continue
        # Blank the planned values on both sides: what remains must be equal.
        old_rest, new_rest = [old], [new]
        try:
            for location in planned[position]:
                set_at(old_rest, 0, fmt.value_path(location), None)
                set_at(new_rest, 0, fmt.value_path(location), None)
        except (TypeError, KeyError, IndexError):
            problems.append(f"item {position} changed shape")
            continue
        if old_rest != new_rest:
            problems.append(f"item {position}: something besides the masked result changed")
    return problems
