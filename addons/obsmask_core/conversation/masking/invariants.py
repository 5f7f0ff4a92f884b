"""The rules a rewritten conversation must keep, checked after every rewrite.

No item is added, removed or reordered, and nothing changes but the planned
results' values: no id, no call, no block, no other field. The one addition
allowed is the frontier breakpoint the plan names (``MaskPlan.breakpoint``):
exactly that ``cache_control`` on exactly that block, which had none. A
body that breaks one of them is never sent; the original goes instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from obsmask_core.conversation.billing.breakpoints import CACHE_CONTROL, AddedBreakpoint
from obsmask_core.conversation.body.request_text import PathStep
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.turns.wire_formats import WireFormat, set_at, value_at


def check_only_planned_changes(
    before: Sequence[object], after: list[object], plan: MaskPlan, fmt: WireFormat,
    also: Sequence[tuple[int, tuple[PathStep, ...]]] = (),
) -> list[str]:
    """The rules of masking for any format: the same number of items
    in the same order, and nothing changed but the planned results' values
    (so no id, call, block or other field). One line per violation.
    ``also``: more places whose values may differ (each item and path),
    checked by the caller."""
    if len(before) != len(after):
        return [f"item count changed from {len(before)} to {len(after)}"]
    planned: dict[int, list[tuple[PathStep, ...]]] = {}
    for decision in plan.decisions:
        planned.setdefault(decision.location[0], []).append(fmt.value_path(decision.location))
    for index, path in also:
        planned.setdefault(index, []).append(path)
    problems = []
    added = plan.breakpoint
    for position, (old, new) in enumerate(zip(before, after, strict=True)):
        if added is not None and position == added.item:
            problem = _breakpoint_problem(old, new, added)
            if problem is not None:
                problems.append(problem)
            continue
        if position not in planned:
            if old != new:
                problems.append(f"item {position} changed but was not planned to")
            continue
        # Blank the planned values on both sides: what remains must be equal.
        old_rest, new_rest = [old], [new]
        try:
            for path in planned[position]:
                set_at(old_rest, 0, path, None)
                set_at(new_rest, 0, path, None)
        except (TypeError, KeyError, IndexError):
            problems.append(f"item {position} changed shape")
            continue
        if old_rest != new_rest:
            problems.append(f"item {position}: something besides the masked result changed")
    return problems


def _breakpoint_problem(old: object, new: object, added: AddedBreakpoint) -> str | None:
    """The item of the frontier breakpoint: the same but for that one
    ``cache_control``, on a block that had none."""
    where = f"item {added.item}"
    try:
        old_block = value_at([old], 0, ("content", added.block))
        new_block = value_at([new], 0, ("content", added.block))
    except (TypeError, KeyError, IndexError):
        return f"{where} changed shape"
    if not isinstance(old_block, dict) or not isinstance(new_block, dict) \
            or CACHE_CONTROL in old_block:
        return f"{where}: the breakpoint's block is not one without a breakpoint"
    if new_block.get(CACHE_CONTROL) != added.control:
        return f"{where}: the breakpoint added is not the one planned"
    rest = [new]
    set_at(rest, 0, ("content", added.block),
           {key: value for key, value in new_block.items() if key != CACHE_CONTROL})
    if rest[0] != old:
        return f"{where}: something besides the breakpoint changed"
    return None
