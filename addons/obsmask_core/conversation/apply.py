"""What a plan makes of the parsed conversation list.

The rewrite never builds the new body from this (it splices the original
body, and its check compares the planned values one by one); this is the
conversation as recall puts results back, as the report replays a plan,
and the masking of an already parsed list for the benchmarks and tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from obsmask_core.conversation.planner import MaskPlan, plan_masking
from obsmask_core.conversation.policy import MaskPolicy
from obsmask_core.conversation.turn_model import Location
from obsmask_core.conversation.wire_formats import WireFormat, set_at


def replace_results(items: Sequence[object], fmt: WireFormat,
                    replacements: Iterable[tuple[Location, object, str]]) -> list[object]:
    """A new list with each (location, value as found, new text) result's
    value replaced by the new text; the input is not modified (containers
    on the way to a replaced value are copied)."""
    out = list(items)
    for location, value, text in replacements:
        set_at(out, location[0], fmt.value_path(location), fmt.replacement(value, text))
    return out


def apply_plan(items: list[object], plan: MaskPlan, fmt: WireFormat) -> list[object]:
    """A new list with the planned results replaced; the input is not modified."""
    return replace_results(items, fmt, ((d.location, d.original_value, d.new_text)
                                        for d in plan.decisions))


def mask_items(items: list[object], policy: MaskPolicy, fmt: WireFormat) -> list[object]:
    """The conversation list of any format (``messages``, ``input``) with its
    old tool results masked; the input is not modified."""
    return apply_plan(items, plan_masking(fmt.index(items), policy, items), fmt)
