"""The check of a masked body: parsed again, it must keep the rules of
masking and be exactly the original with the planned values replaced. A
body that fails is never sent."""

from __future__ import annotations

from collections.abc import Sequence

from obsmask_core.conversation.body.quick_body import QuickBody
from obsmask_core.conversation.body.request_body import Edit, ExactBody
from obsmask_core.conversation.body.request_text import PathStep
from obsmask_core.conversation.masking.invariants import check_only_planned_changes
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.reuse.grown_body import GrownBody
from obsmask_core.conversation.turns.wire_formats import WireFormat, value_at

# A body read quickly, exactly, or as grown from a kept request.
ReadBody = QuickBody | ExactBody | GrownBody


def verify(
    request: ReadBody,
    new_body: bytes,
    replacements: list[Edit],
    plan: MaskPlan,
    fmt: WireFormat,
    end: int | None = None,
    also: Sequence[tuple[int, tuple[PathStep, ...]]] = (),
) -> tuple[str | None, bool]:
    """Parse the masked body again: the rules must hold, and the result must
    be exactly the original with the planned values replaced.

    The rules check finds every item equal to the original's once the
    planned values are blanked on both sides; what remains is that each
    planned value is the one planned. Together that is the whole list
    equal to the original with the plan applied, without comparing the
    whole list a second time. The second of the pair: whether the masked
    list proved to close at ``end``. ``also``: places some of
    ``replacements`` write that the plan does not name (each item and
    path), checked like its values."""
    try:
        after, proven = request.parse_again(new_body, fmt.list_member, end)
    except (ValueError, RecursionError) as e:
        return f"masked body is not valid JSON ({e})", False
    violation = _violation(request, after, replacements, plan, fmt, also)
    return violation, proven and violation is None


def _violation(request: ReadBody, after: object, replacements: list[Edit],
               plan: MaskPlan, fmt: WireFormat,
               also: Sequence[tuple[int, tuple[PathStep, ...]]]) -> str | None:
    members = request.members
    if not isinstance(after, dict) or after.keys() != members.keys():
        return "masked body has different top-level members"
    for key, value in members.items():
        if key != fmt.list_member and after[key] != value:
            return f"top-level member {key!r} changed"
    items = after[fmt.list_member]
    if not isinstance(items, list):
        return f"masked body has no {fmt.list_member} list"
    problems = check_only_planned_changes(request.items, items, plan, fmt, also)
    if problems:
        return "; ".join(problems[:3])
    for replacement in replacements:
        try:
            value = value_at(items, replacement.index, replacement.path)
        except (TypeError, KeyError, IndexError):
            return "masked values differ from the plan"
        if value != replacement.new:
            return "masked values differ from the plan"
    return None
