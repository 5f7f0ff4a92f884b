"""The outcome of a plan: the request with the plan's edits made, its masked
body made from the kept request's (``reuse``: the same edits, or only those
that changed), spliced at places a parse proved, or searched for and checked
(``checked_splice``)."""

from __future__ import annotations

from collections.abc import Sequence

from obsmask_core.conversation.billing.breakpoints import CACHE_CONTROL
from obsmask_core.conversation.body.request_body import Edit, MemberAdded, Replacement
from obsmask_core.conversation.masking.checked_splice import splice_and_check
from obsmask_core.conversation.masking.outcomes import Masked, Refused, RewriteOutcome, Unchanged
from obsmask_core.conversation.masking.recall import RecalledResult
from obsmask_core.conversation.masking.verify import ReadBody
from obsmask_core.conversation.planning.plan import RECALLED, MaskDecision, MaskPlan
from obsmask_core.conversation.reuse.hint import QuickRead, Reuse, signature_of
from obsmask_core.conversation.reuse.masked_again import masked_again, placed_in_order
from obsmask_core.conversation.reuse.proven_spans import Place, candidates, constructed, unproven
from obsmask_core.conversation.reuse.records import MaskedEnd
from obsmask_core.conversation.turns.turn_model import ToolTurnIndex
from obsmask_core.conversation.turns.wire_formats import WireFormat, value_at
from obsmask_core.shared.json_text import Span


def masked_outcome(request: ReadBody, plan: MaskPlan, fmt: WireFormat,
                   recalls: list[RecalledResult], chars: int, reuse: Reuse | None, end: int | None,
                   proven: dict[Place, Span], index: ToolTurnIndex, prove: bool,
                   ) -> tuple[RewriteOutcome, MaskedEnd | None]:
    """The outcome of ``plan``: the body with its replacements, made anew
    or (``reuse``) from the kept request's masked body; and where the
    masked body's list closes, when that is proven (the list closing at
    ``end`` in the body, every replacement before it), with its edits
    when their spans were. ``proven``: the spans a parse proved, the ones
    the check of a new body proves added (with ``prove``, those of every
    value ``index`` says masking may replace later too)."""
    chars_after = chars - sum(len(d.original) - len(d.new_text) for d in plan.decisions)
    _add_recalls(plan, recalls)
    if not plan.decisions:
        return Unchanged("nothing to mask", plan), None
    chars_after += sum(len(r.text) - len(r.stub) for r in recalls)
    signature = signature_of(plan)
    if reuse is not None and isinstance(request, QuickRead):
        if (made := reuse.masked_body(request.body, signature)) is not None:
            # The kept request's replacements, all in the items both share.
            return (Masked(made[0], plan, chars, chars_after, reused=True),
                    MaskedEnd(made[1], signature, reuse.previous.placed))
        if end is not None and (again := masked_again(
                reuse.previous, request.body, reuse.grown.start, signature,
                lambda positions: _edits(request, plan, fmt, positions), proven,
                end)) is not None:
            # The kept request's masked body up to the first edit that changed.
            return (Masked(again.body, plan, chars, chars_after),
                    MaskedEnd(again.end, signature, again.placed))
    replacements = _edits(request, plan, fmt)
    if reuse is not None and end is not None and isinstance(request, QuickRead) \
            and (whole := constructed(request.body, replacements, proven, end)) is not None:
        # Every value's place proven by a parse: the splice is the check.
        return (Masked(whole.body, plan, chars, chars_after),
                MaskedEnd(end + whole.grew, signature,
                          placed_in_order(signature, whole.placed)))
    # The places of the values masking may replace later are proven on the
    # way when the masker keeps this request for the next one.
    probes = unproven(candidates(request.items, 0, index, fmt), replacements, proven) \
        if prove else []
    checked = splice_and_check(request, replacements, plan, fmt, end, probes)
    if isinstance(checked, str):
        return Refused(checked, plan), None
    proven.update(checked.proven)
    if checked.masked_end is None:
        return Masked(checked.body, plan, chars, chars_after), None
    placed = placed_in_order(signature, checked.placed) if checked.placed is not None else None
    return (Masked(checked.body, plan, chars, chars_after),
            MaskedEnd(checked.masked_end, signature, placed))


def _edits(request: ReadBody, plan: MaskPlan, fmt: WireFormat,
           positions: Sequence[int] | None = None) -> list[Edit]:
    """The plan's edits, in the order of its signature (of its entries at
    ``positions`` only, when given): each decision's replacement, then the
    frontier breakpoint it adds."""
    decisions, added = plan.decisions, plan.breakpoint
    if positions is None:
        positions = range(len(decisions) + (added is not None))
    edits: list[Edit] = []
    for at in positions:
        if at < len(decisions):
            d = decisions[at]
            edits.append(Replacement(d.location[0], fmt.value_path(d.location), d.original_value,
                                     fmt.replacement(d.original_value, d.new_text),
                                     anchor=d.call_id))
        elif added is not None:
            edits.append(MemberAdded(
                added.item, ("content", added.block),
                value_at([request.items[added.item]], 0, ("content", added.block)),
                CACHE_CONTROL, dict(added.control)))
    return edits


def _add_recalls(plan: MaskPlan, recalls: list[RecalledResult]) -> None:
    """A decision for each recalled result that masking leaves whole (one it
    masks goes out as its placeholder: the plan's decision says so)."""
    planned = {d.location for d in plan.decisions}
    plan.decisions.extend(
        MaskDecision(location=r.location, call_id=r.call_id, tool_name=r.tool_name,
                     original=r.stub, original_value=r.stub_value, new_text=r.text,
                     kind=RECALLED)
        for r in recalls if r.location not in planned)
