"""What a plan makes of the parsed conversation list.

The rewrite never builds the new body from this (it splices the original
body, and its check compares the planned values one by one); this is the
conversation as recall puts results back, as the report replays a plan,
and the masking of an already parsed list for the benchmarks and tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from obsmask_core.conversation.billing.breakpoints import CACHE_CONTROL, CacheLayout
from obsmask_core.conversation.billing.terms import BillingTerms
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.turn_model import Location
from obsmask_core.conversation.turns.wire_formats import WireFormat, set_at, value_at


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
    """A new list with the planned results replaced, and the frontier
    breakpoint added if the plan has one; the input is not modified."""
    out = replace_results(items, fmt, ((d.location, d.original_value, d.new_text)
                                       for d in plan.decisions))
    if (added := plan.breakpoint) is not None:
        path = ("content", added.block)
        block = value_at(out, added.item, path)
        assert isinstance(block, dict)
        set_at(out, added.item, path, {**block, CACHE_CONTROL: dict(added.control)})
    return out


def mask_items(items: list[object], policy: MaskPolicy, fmt: WireFormat,
               layout: CacheLayout | None = None) -> list[object]:
    """The conversation list of any format (``messages``, ``input``) with its
    old tool results masked; the input is not modified. ``layout``: an
    Anthropic request's breakpoints (``breakpoints.read_layout``), which the
    rewrite of a whole body reads from it."""
    plan = plan_masking(fmt.index(items), policy, items, terms=BillingTerms(layout))
    return apply_plan(items, plan, fmt)
