"""Mask a whole request body: bytes in, a tagged outcome out, never an exception.

The pipeline is parse -> plan -> splice -> verify. Only the values chosen by
the plan are replaced in the original body; every other byte stays as the
client sent it. The new body is then parsed again and checked against the
rules of masking (``invariants``): a body that fails is never sent. The body
is read quickly first and exactly when that does not do (``request_body``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from obsmask_core.conversation.invariants import check_only_planned_changes
from obsmask_core.conversation.planner import RECALLED, MaskDecision, MaskPlan, plan_masking
from obsmask_core.conversation.policy import MaskPolicy
from obsmask_core.conversation.recall import Recall, find_recalls, with_recalls
from obsmask_core.conversation.request_body import (
    ExactBody,
    QuickBody,
    Replacement,
    RequestBody,
)
from obsmask_core.conversation.request_text import UnsupportedBody
from obsmask_core.conversation.wire_formats import CHAT, WireFormat, value_at


@dataclass(frozen=True)
class Masked:
    """The new body, and what was done (``tool_chars_*``: characters of the
    tool results' text before and after)."""

    body: bytes
    plan: MaskPlan
    tool_chars_before: int
    tool_chars_after: int
    reason: ClassVar[str] = "masked"


@dataclass(frozen=True)
class Unchanged:
    """A request read as it should be, with nothing to change (or masking is
    off): the original goes out."""

    reason: str
    plan: MaskPlan | None = None
    body: ClassVar[None] = None


@dataclass(frozen=True)
class Unreadable:
    """A body that is not a request of the format (not JSON, no list...):
    the original goes out, and the reason is worth a warning."""

    reason: str
    body: ClassVar[None] = None
    plan: ClassVar[None] = None


@dataclass(frozen=True)
class Refused:
    """The masked body broke a rule of masking (a bug of ours): the original
    goes out, and ``violation`` is worth an error in the log."""

    violation: str
    plan: MaskPlan
    body: ClassVar[None] = None
    reason: ClassVar[str] = "masked body failed its check"


RewriteOutcome = Masked | Unchanged | Unreadable | Refused
DISABLED = "masking is disabled"
HELD_OUT = "the conversation is in the holdout group (holdout_percent)"


def mask_request_body(
    body: bytes, policy: MaskPolicy, fmt: WireFormat = CHAT, *, recall: bool = False
) -> RewriteOutcome:
    """Mask old tool results in a request body of format ``fmt``. With
    ``recall``, the recall stubs among its results are replaced by the text
    they ask for first (``recall``), and masking plans on the conversation
    as it will then go out."""
    if not policy.enabled:
        return Unchanged(DISABLED)
    try:
        quick = QuickBody.read(body, fmt.list_member)
        outcome = mask_read_body(quick, policy, fmt, recall) if quick is not None else None
    except (RecursionError, ValueError):
        # orjson reads nesting Python cannot compare (past ~1000 levels):
        # the exact reader refuses such a body with its reason.
        outcome = None
    # A value the quick reader could not place, or placed wrongly (the
    # check saw it): the exact reader decides.
    if outcome is not None and not isinstance(outcome, Refused):
        return outcome
    try:
        exact = ExactBody.read(body, fmt.list_member)
    except UnsupportedBody as e:
        return Unreadable(str(e))
    return mask_read_body(exact, policy, fmt, recall)


def mask_read_body(request: RequestBody, policy: MaskPolicy, fmt: WireFormat,
                   recall: bool = False) -> RewriteOutcome:
    """Plan, splice and check a body already read (quickly or exactly)."""
    index = fmt.index(request.items)
    chars = sum(len(result.text) for result in index.results if result.text is not None)
    recalls = find_recalls(index) if recall else []
    items = request.items
    if recalls:
        items = with_recalls(request.items, recalls, fmt)
        index = fmt.index(items)
    plan = plan_masking(index, policy, items, recall=recall,
                        recalled=frozenset(r.location for r in recalls))
    if plan.held_out and not recalls:
        return Unchanged(HELD_OUT, plan)
    chars_after = chars - sum(len(d.original) - len(d.new_text) for d in plan.decisions)
    _add_recalls(plan, recalls)
    if not plan.decisions:
        return Unchanged("nothing to mask", plan)
    chars_after += sum(len(r.text) - len(r.stub) for r in recalls)

    replacements = [
        Replacement(d.location[0], fmt.value_path(d.location), d.original_value,
                    fmt.replacement(d.original_value, d.new_text))
        for d in plan.decisions]
    new_body = request.replaced(replacements)
    if new_body is None:
        return Refused("a planned value could not be located", plan)
    violation = _verify(request, new_body, replacements, plan, fmt)
    if violation is not None:
        return Refused(violation, plan)
    return Masked(new_body, plan, chars, chars_after)


def _add_recalls(plan: MaskPlan, recalls: list[Recall]) -> None:
    """A decision for each recalled result that masking leaves whole (one it
    masks goes out as its placeholder: the plan's decision says so)."""
    planned = {d.location for d in plan.decisions}
    plan.decisions.extend(
        MaskDecision(location=r.location, call_id=r.call_id, tool_name=r.tool_name,
                     original=r.stub, original_value=r.stub_value, new_text=r.text,
                     kind=RECALLED)
        for r in recalls if r.location not in planned)


def _verify(
    request: RequestBody,
    new_body: bytes,
    replacements: list[Replacement],
    plan: MaskPlan,
    fmt: WireFormat,
) -> str | None:
    """Parse the masked body again: the rules must hold, and the result must
    be exactly the original with the planned values replaced.

    The rules check finds every item equal to the original's once the
    planned values are blanked on both sides; what remains is that each
    planned value is the one planned. Together that is the whole list
    equal to the original with the plan applied, without comparing the
    whole list a second time."""
    try:
        after = request.parse_again(new_body)
    except (ValueError, RecursionError) as e:
        return f"masked body is not valid JSON ({e})"
    members = request.members
    if not isinstance(after, dict) or after.keys() != members.keys():
        return "masked body has different top-level members"
    for key, value in members.items():
        if key != fmt.list_member and after[key] != value:
            return f"top-level member {key!r} changed"
    items = after[fmt.list_member]
    if not isinstance(items, list):
        return f"masked body has no {fmt.list_member} list"
    problems = check_only_planned_changes(request.items, items, plan, fmt)
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
