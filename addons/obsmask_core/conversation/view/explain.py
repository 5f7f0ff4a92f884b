"""What masking did to each tool result of one request, and why: the facts
obsmask's content view shows (``mitm/contentview.py``; the page that shows
them is ``masking_page.py``).

What changed is read from the two bodies themselves, the original (the
flow's backup) and the one that went out, both read with the tool-turn
model and compared result by result (masking never adds, removes or moves
one). Why a result went out as it came is the planner's: the original is
planned again with the settings in force, and when that gives back the body
that went out, byte for byte, each result's reason and decision are the
plan's. When it does not (the settings changed since, or another run masked
the flow), the facts of the diff stand alone and the reasons are said to be
unavailable.

The items of the two lists line up one to one, so the page's diff is made
item by item, of the items that changed: its work grows with them, not with
the square of the body (mitmproxy renders a view on its event loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.conversation.billing.last_seen import Recorded
from obsmask_core.conversation.body.request_text import (
    NonFiniteNumber,
    RequestText,
    UnsupportedBody,
    parse_request,
)
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.planning.judgements import KeptReason
from obsmask_core.conversation.planning.plan import CLIPPED, MASKED, RECALLED, DecisionKind
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.settings.routes import FORMAT_TITLES
from obsmask_core.conversation.turns.turn_model import Location, ToolResult
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.conversation.view.explain_refetches import RefetchedCall, refetched_calls
from obsmask_core.shared.recall_text import find_stub, is_recall_tool
from obsmask_core.shared.truncation import DEFAULT_MARKER
from obsmask_core.shared.view_text import DiffPart, pretty_body, pretty_value


@dataclass(frozen=True)
class ResultFacts:
    """One tool result: where, which call, its text's length before and
    after (None: it holds no text), and what became of it: ``decision`` when
    it changed, else ``kept`` says why it went out as it came (None: the
    reason is not known)."""

    location: Location
    call_id: str
    tool_name: str | None
    chars_before: int | None
    chars_after: int | None
    decision: DecisionKind | None = None
    kept: KeptReason | None = None


@dataclass(frozen=True)
class MaskingExplanation:
    """Every tool result of a masked request (orphans included), in the
    order of the request. ``reasons_note`` is None when the reasons are the
    plan's; else it says why they are not available. ``stage`` and
    ``frontier_turn`` are the plan's (None without a plan). ``parts``: the
    items that differ, in order, pretty-printed (then the request's other
    members, if they differ), for the page's diff."""

    format: str
    results: tuple[ResultFacts, ...]
    reasons_note: str | None
    stage: str | None = None
    frontier_turn: int | None = None
    parts: tuple[DiffPart, ...] = ()
    # The re-fetches of the newest answer the flow recorded, each with the
    # earlier call it repeats.
    refetches: tuple[RefetchedCall, ...] = ()

    @property
    def orphans(self) -> int:
        return sum(1 for r in self.results if r.kept == "orphan")

    @property
    def changed(self) -> tuple[ResultFacts, ...]:
        return tuple(r for r in self.results if r.decision is not None)

    @property
    def unchanged(self) -> tuple[ResultFacts, ...]:
        return tuple(r for r in self.results if r.decision is None)

    def count(self, decision: DecisionKind) -> int:
        return sum(1 for r in self.results if r.decision == decision)


@dataclass(frozen=True)
class NotExplained:
    """The two bodies cannot be compared; ``reason`` says why."""

    reason: str


def explain_masking(
    original: bytes, masked: bytes, fmt: WireFormat, policy: MaskPolicy | None = None,
    *, recall: bool = False, table: Recorded | None = None,
    refetch_calls: Sequence[str] = (),
) -> MaskingExplanation | NotExplained:
    """The facts of each tool result of ``original`` as ``masked`` carries
    it; the reasons from planning ``original`` again with ``policy`` (and
    ``recall``, and what the flow recorded of the table of when
    conversations were last seen, ``table``: the conversation's cold and
    doubtful ends, and where the provider's brake held its frontier),
    when that gives ``masked`` back. ``refetch_calls``: the call ids
    the flow recorded as new re-fetches, found with what they repeat."""
    try:
        before_text, after_text = original.decode("utf-8"), masked.decode("utf-8")
        before = parse_request(before_text, fmt.list_member)
        after = parse_request(after_text, fmt.list_member)
    except UnicodeDecodeError as e:
        return NotExplained(f"a body is not valid UTF-8 (byte {e.start})")
    except UnsupportedBody as e:
        return NotExplained(f"a body is not a {FORMAT_TITLES.get(fmt.name, fmt.name)} "
                            f"request ({e})")
    before_index, after_index = fmt.index(before.items), fmt.index(after.items)
    went_out = {result.location: result for result in after_index.results}
    if (len(before.items) != len(after.items)
            or [(r.location, r.call_id) for r in before_index.results]
            != [(r.location, r.call_id) for r in after_index.results]):
        return NotExplained("the two bodies do not hold the same tool results")

    decisions: dict[Location, DecisionKind] = {}
    kept_at: dict[Location, KeptReason] = {}
    note: str | None = "no settings to plan the request again with"
    stage: str | None = None
    frontier: int | None = None
    if policy is not None:
        outcome = mask_request_body(original, policy, fmt, recall=recall,
                                    visit=table)
        if isinstance(outcome, Masked) and outcome.body == masked:
            plan = outcome.plan
            decisions = {d.location: d.kind for d in plan.decisions}
            kept_at = plan.kept_at
            note, stage, frontier = None, plan.stage, plan.frontier_turn
        elif isinstance(outcome, Masked):
            note = ("planned again with the settings in force, the original gives another "
                    "body (the settings changed since this request was masked?)")
        else:
            note = (f"planned again with the settings in force, the original goes out "
                    f"unchanged ({outcome.reason}): the settings changed since this request "
                    "was masked?")

    facts: list[ResultFacts] = []
    for result in before_index.results:
        out = went_out[result.location]
        changed = out.content != result.content
        decision = (decisions.get(result.location) or _decision_seen(result, out)
                    if changed else None)
        facts.append(ResultFacts(
            result.location, result.call_id, result.tool_name, _chars(result.text),
            _chars(out.text), decision,
            None if changed else kept_at.get(result.location)))
    facts.extend(
        ResultFacts(location, _orphan_id(before.items, location, fmt), None, None, None,
                    kept="orphan")
        for location in before_index.orphans)
    facts.sort(key=lambda f: f.location)
    return MaskingExplanation(fmt.name, tuple(facts), note, stage, frontier,
                              _changed_parts(before, after, fmt, facts),
                              refetched_calls(before.items, before_index, refetch_calls))


def _changed_parts(before: RequestText, after: RequestText, fmt: WireFormat,
                   facts: Sequence[ResultFacts]) -> tuple[DiffPart, ...]:
    """The items that differ, each pretty-printed on its own and labelled
    with its place and the call ids of its changed results, then the other
    members of the request if they differ (masking leaves them alone)."""
    changed_ids: dict[int, list[str]] = {}
    for fact in facts:
        if fact.decision is not None:
            changed_ids.setdefault(fact.location[0], []).append(fact.call_id)
    parts = [
        DiffPart(f"{fmt.list_member}[{position}]"
                 + (f" ({', '.join(changed_ids[position])})" if position in changed_ids else ""),
                 pretty_body(_item_text(before, position)),
                 pretty_body(_item_text(after, position)))
        for position, (was, went) in enumerate(zip(before.items, after.items, strict=True))
        if was != went
    ]
    others = [{key: value for key, value in request.members.items() if key != fmt.list_member}
              for request in (before, after)]
    if others[0] != others[1]:
        parts.append(DiffPart(f"the request's members besides {fmt.list_member}",
                              _pretty(others[0]), _pretty(others[1])))
    return tuple(parts)


def _item_text(request: RequestText, position: int) -> str:
    start, end = request.item_spans[position]
    return request.text[start:end]


def _pretty(value: object) -> str:
    return pretty_value(value, _constant)


def _constant(value: object) -> object:
    """NaN and the infinities as the span parser reads them, for json.dumps."""
    if isinstance(value, NonFiniteNumber):
        return float(value.name)
    raise TypeError(f"{type(value).__name__} is not JSON")  # pragma: no cover - parsed JSON


def _chars(value: str | None) -> int | None:
    return None if value is None else len(value)


def _decision_seen(before: ToolResult, after: ToolResult) -> DecisionKind:
    """What a change looks like, without a plan: a clip marker says clipped;
    a recall stub that grew, recalled; anything else is masked (the only
    other rewrite)."""
    if after.text is not None and DEFAULT_MARKER.found_in(after.text):
        return CLIPPED
    if (before.text is not None and after.text is not None and is_recall_tool(before.tool_name)
            and find_stub(before.text) is not None and len(after.text) > len(before.text)):
        return RECALLED
    return MASKED


# Where each format keeps a result's call id, in the item or block that
# holds the result (for orphans, which the tool-turn model keeps as places).
_ID_MEMBERS = ("tool_call_id", "tool_use_id", "call_id")


def _orphan_id(items: Sequence[object], location: Location, fmt: WireFormat) -> str:
    """An orphan's call id as the request writes it (its place if none)."""
    holder: object = items[location[0]]
    for step in fmt.value_path(location)[:-1]:
        if isinstance(holder, dict) and isinstance(step, str):
            holder = holder.get(step)
        elif isinstance(holder, list) and isinstance(step, int) and 0 <= step < len(holder):
            holder = holder[step]
        else:
            holder = None
    if isinstance(holder, dict):
        for member in _ID_MEMBERS:
            if isinstance(value := holder.get(member), str):
                return value
    return "#" + ".".join(str(step) for step in location)
