"""A masked body spliced and checked, proving on the way where the body's
other values sit.

The planned values are found by their bytes and replaced, and the result
is parsed again and checked (``verify``). When the masker keeps requests,
the values masking may replace later (``proven_spans.candidates``) are
found too, and in the body that is checked each is replaced by a sentinel
string of its own: the one parse then proves every place, and the body
that goes out is the client's with the planned values alone replaced, at
the places the check proved (the bytes a sentinel stood for are the
value's own, and the check read that sentinel exactly at its value's
place). If the search or the check fails with the sentinels, the planned
values are spliced and checked alone, as before: proving never refuses a
body.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.conversation.body.quick_body import QuickBody
from obsmask_core.conversation.body.request_body import (
    Edit,
    ExactBody,
    Replacement,
    edits_made,
    edits_placed,
)
from obsmask_core.conversation.masking.verify import ReadBody, verify
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.reuse.hint import QuickRead
from obsmask_core.conversation.reuse.proven_spans import (
    Candidate,
    Place,
    proven_by_check,
    sentinel,
)
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.shared.json_text import Span


@dataclass(frozen=True)
class Checked:
    """A masked body that passed the check; where its list closes, when the
    check proved it; and the places the check proved (in the client's
    body)."""

    body: bytes
    masked_end: int | None
    proven: dict[Place, Span]
    # Where each edit was made and what it wrote, in the order of the
    # edits (``edits_placed``), when the check told every edit's place
    # (no two with the same value and text); None otherwise.
    placed: list[tuple[Span, bytes]] | None = None


def splice_and_check(request: ReadBody, edits: list[Edit], plan: MaskPlan, fmt: WireFormat,
                     end: int | None, probes: Sequence[Candidate]) -> Checked | str:
    """``request`` with ``edits`` made and checked, proving the places of
    ``probes`` on the way; or why it cannot go out."""
    found: tuple[bytes, list[tuple[Edit, Span]]] | None = None
    body = b""
    if isinstance(request, ExactBody):
        new_body = request.replaced(edits)
    else:
        if probes and (checked := _with_probes(request, edits, plan, fmt, end, probes)):
            return checked
        body = request.body
        found = QuickBody.replace_found(body, edits)
        new_body = found[0] if found is not None else None
    if new_body is None:
        return "a planned value could not be located"
    masked_end = _masked_end(request, new_body, end)
    violation, proven_end = verify(request, new_body, edits, plan, fmt, masked_end)
    if violation is not None:
        return violation
    if found is None:
        return Checked(new_body, masked_end if proven_end else None, {})
    proven = proven_by_check(found[1])
    return Checked(new_body, masked_end if proven_end else None, proven,
                   _placed(body, edits, found[1], proven))


def _with_probes(request: QuickRead, edits: list[Edit], plan: MaskPlan, fmt: WireFormat,
                 end: int | None, probes: Sequence[Candidate]) -> Checked | None:
    body = request.body
    sentinels = [Replacement(place[0], place[1], value, sentinel(number), anchor=anchor)
                 for number, (place, value, anchor) in enumerate(probes)]
    found = QuickBody.replace_found(body, [*edits, *sentinels])
    if found is None:
        return None
    probe_end = _masked_end(request, found[0], end)
    violation, proven_end = verify(request, found[0], [*edits, *sentinels], plan, fmt,
                                   probe_end, also=[place for place, _, _ in probes])
    if violation is not None:
        return None
    probe_ids = {id(edit) for edit in sentinels}
    made = [(edit, span) for edit, span in found[1] if id(edit) not in probe_ids]
    new_body = edits_made(body, made)
    assert new_body is not None  # each was placed in the body checked
    masked_end = end + len(new_body) - len(body) \
        if proven_end and end is not None else None
    proven = proven_by_check(found[1])
    return Checked(new_body, masked_end, proven, _placed(body, edits, made, proven))


def _placed(body: bytes, edits: Sequence[Edit], made: Sequence[tuple[Edit, Span]],
            proven: dict[Place, Span]) -> list[tuple[Span, bytes]] | None:
    """Where ``edits`` were made, in their order, when the check proved
    each one's place."""
    if len(made) != len(edits) or any((edit.index, edit.path) not in proven
                                       for edit in edits):
        return None
    order = {id(edit): number for number, edit in enumerate(edits)}
    return edits_placed(body, sorted(made, key=lambda found: order[id(found[0])]))


def _masked_end(request: ReadBody, new_body: bytes, end: int | None) -> int | None:
    """Where the masked list closes if every edit was made before ``end``:
    the rest of the body is the client's (the check proves it)."""
    if end is None or isinstance(request, ExactBody) \
            or not new_body.endswith(request.body[end:]):
        return None
    return end + len(new_body) - len(request.body)
