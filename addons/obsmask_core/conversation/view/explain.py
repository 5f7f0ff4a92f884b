"""What masking did to each tool result of one request, and why: the facts
obsmask's content view shows (``mitm/contentview.py``).

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

import json
from collections.abc import Mapping, Sequence
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
from obsmask_core.conversation.planning.planner import CLIPPED, MASKED, RECALLED, DecisionKind
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.settings.routes import FORMAT_TITLES
from obsmask_core.conversation.turns.turn_model import Location, ToolResult
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.conversation.view.explain_refetches import (
    REFETCHED_MEANING,
    RefetchedCall,
    refetch_lines,
    refetched_calls,
)
from obsmask_core.shared.cache_check import CacheCheck, CacheTokens
from obsmask_core.shared.read_back import whole, word
from obsmask_core.shared.recall_text import find_stub, is_recall_tool
from obsmask_core.shared.refetch_facts import REFETCHES_KEY, RefetchFacts
from obsmask_core.shared.truncation import DEFAULT_MARKER
from obsmask_core.shared.view_text import (
    DiffPart,
    ViewLine,
    comment_lines,
    diff_lines,
    heading,
    number,
    paragraph,
    parts_diff_lines,
    pretty_body,
    sizes,
    table,
    text,
    title,
    wrapped,
)

# What each reason means, for a reader who has not read the README.
REASON_MEANINGS: dict[KeptReason, str] = {
    "in_window": "inside the window (the most recent tool turns)",
    "pending": "older than the window, waiting for the frontier's next move",
    "cache": "masking it would have cost more than the prompt cache saves: kept for good",
    "refetched": REFETCHED_MEANING,
    "error": "reads as an error (keep_errors)",
    "per_tool": "among the most recent results of its tool (keep_last_k_per_tool)",
    "excluded": "its tool is excluded (exclude_tools)",
    "min_chars": "shorter than min_chars",
    "short": "the placeholder would not be shorter",
    "not_text": "holds no text that masking replaces",
    "already_masked": "already the placeholder",
    "orphan": "no earlier tool call names it",
}
REASON_ORDER: tuple[KeptReason, ...] = tuple(REASON_MEANINGS)
# Where each format keeps a result's call id, in the item or block that
# holds the result (for orphans, which the tool-turn model keeps as places).
_ID_MEMBERS = ("tool_call_id", "tool_use_id", "call_id")


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

    def kept_by_reason(self) -> dict[KeptReason | None, list[ResultFacts]]:
        """The unchanged results by reason, in REASON_ORDER (None last:
        reason unknown)."""
        grouped: dict[KeptReason | None, list[ResultFacts]] = {}
        for reason in (*REASON_ORDER, None):
            found = [r for r in self.unchanged if r.kept == reason]
            if found:
                grouped[reason] = found
        return grouped


@dataclass(frozen=True)
class NotExplained:
    """The two bodies cannot be compared; ``reason`` says why."""

    reason: str


def explain_masking(
    original: bytes, masked: bytes, fmt: WireFormat, policy: MaskPolicy | None = None,
    *, recall: bool = False, cold_ends: frozenset[int] = frozenset(),
    refetch_calls: Sequence[str] = (),
) -> MaskingExplanation | NotExplained:
    """The facts of each tool result of ``original`` as ``masked`` carries
    it; the reasons from planning ``original`` again with ``policy`` (and
    ``recall``, and the conversation's ``cold_ends`` as the flow recorded
    them), when that gives ``masked`` back. ``refetch_calls``: the call ids
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
                                    visit=Recorded(cold_ends) if cold_ends else None)
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
    return json.dumps(value, indent=2, ensure_ascii=False, default=_constant)


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


# The page -------------------------------------------------------------------------


@dataclass(frozen=True)
class MaskingRecord:
    """What the flow's metadata says of the masking (summary.MaskSummary
    as saved): the figures of the moment it was done. Any may be missing
    (None) in a flow written by another version."""

    format: str | None = None
    stage: str | None = None
    frontier_turn: int | None = None
    window_turns: int | None = None
    tool_turns: int | None = None
    tool_results: int | None = None
    body_bytes_before: int | None = None
    body_bytes_after: int | None = None
    tool_chars_before: int | None = None
    tool_chars_after: int | None = None
    # The ledger's prediction of the provider's cache, and its report.
    cache: CacheCheck | None = None
    # The request ends the conversation came back cold at (``last_seen``).
    cold_ends: frozenset[int] = frozenset()
    refetches: RefetchFacts | None = None

    @classmethod
    def of(cls, metadata: Mapping[str, object]) -> MaskingRecord:
        def figure(key: str) -> int | None:
            return whole(metadata.get(key))

        return cls(word(metadata.get("format")), word(metadata.get("stage")),
                   figure("frontier_turn"), figure("window_turns"), figure("tool_turns"),
                   figure("tool_results"), figure("body_bytes_before"),
                   figure("body_bytes_after"), figure("tool_chars_before"),
                   figure("tool_chars_after"), CacheCheck.read(metadata),
                   _cold_ends(metadata.get("bill")),
                   RefetchFacts.read(metadata.get(REFETCHES_KEY)))


def _cold_ends(bill: object) -> frozenset[int]:
    """The bill's ``cold_ends``, each a whole number, or none."""
    ends = bill.get("cold_ends") if isinstance(bill, Mapping) else None
    if not isinstance(ends, list):
        return frozenset()
    read = [whole(end) for end in ends]
    return frozenset(end for end in read if end is not None)


def masking_page(
    explanation: MaskingExplanation | NotExplained, record: MaskingRecord,
    original: str | None, masked: str, comment: Sequence[str] = (),
) -> list[ViewLine]:
    """The view of a masked request: a header, the provider's cache as the
    ledger predicted it and as the provider reported it, the re-fetches
    (calls the model made again once their result was masked), each
    masked, clipped or recalled result, the kept ones by reason, the flow's
    comment, and the diff of the two bodies pretty-printed: item by item
    when the explanation lined them up, else whole, when not too large
    (``original`` None: the flow does not hold it; the masked body alone)."""
    fmt = record.format or (explanation.format if isinstance(explanation, MaskingExplanation)
                            else None)
    lines = [title(f"obsmask: masked request ({FORMAT_TITLES.get(fmt or '', fmt or '?')})")]
    if isinstance(explanation, NotExplained):
        lines.extend(paragraph(f"The results cannot be listed: {explanation.reason}."))
    else:
        lines.extend(_summary(explanation, record, original, masked))
    if record.cache is not None:
        lines.extend(_cache(record.cache))
    lines.extend(refetch_lines(record.refetches, explanation.refetches
                               if isinstance(explanation, MaskingExplanation) else None))
    if isinstance(explanation, MaskingExplanation):
        lines.extend(_changed(explanation))
        lines.extend(_kept(explanation))
    lines.extend(comment_lines(comment))
    lines.append(text(""))
    if original is None:
        lines.append(heading("The request as it went out (the original is not in the flow):"))
        lines.extend(text(line) for line in pretty_body(masked).splitlines())
        return lines
    if isinstance(explanation, MaskingExplanation):
        lines.append(heading("The items that changed, in the original request (-) and as "
                             "they went out (+), pretty-printed JSON:"))
        diff = parts_diff_lines(explanation.parts, "original request", "masked request",
                                "items")
    else:
        lines.append(heading("The original request (-) and the one that went out (+), "
                             "pretty-printed JSON:"))
        diff = diff_lines(pretty_body(original), pretty_body(masked), "original request",
                          "masked request")
    lines.extend(diff or [text("  (the two bodies are the same)")])
    return lines


def _summary(explanation: MaskingExplanation, record: MaskingRecord, original: str | None,
             masked: str) -> list[ViewLine]:
    """The counts (of the results and the orphans: the two lists below
    hold both), the stage and the frontier, and the sizes: the record's
    (the body as it went over the wire, compressed or not) or, where it has
    none, the bodies' and the results' here (the body decoded)."""
    counts = [f"masked {explanation.count(MASKED)}", f"clipped {explanation.count(CLIPPED)}"]
    if recalled := explanation.count(RECALLED):
        counts.append(f"recalled {recalled}")
    orphans = explanation.orphans
    results = len(explanation.results) - orphans
    of_orphans = f" and {orphans} orphan{'' if orphans == 1 else 's'}" if orphans else ""
    stage = record.stage or explanation.stage or "n/a"
    frontier = record.frontier_turn if record.frontier_turn is not None else (
        explanation.frontier_turn)
    window = (f"; window {record.window_turns} tool turns"
              if record.window_turns is not None else "")
    if record.body_bytes_before is not None and record.body_bytes_after is not None:
        body = sizes(record.body_bytes_before, record.body_bytes_after, "bytes on the wire")
    else:
        body = sizes(len(original.encode("utf-8")) if original is not None else None,
                     len(masked.encode("utf-8")), "bytes decoded")
    if record.tool_chars_before is not None and record.tool_chars_after is not None:
        tool_text = sizes(record.tool_chars_before, record.tool_chars_after, "chars")
    else:
        tool_text = sizes(sum(r.chars_before or 0 for r in explanation.results),
                          sum(r.chars_after or 0 for r in explanation.results), "chars")
    return [
        text(f"{', '.join(counts)} of {results} tool results{of_orphans}; stage {stage}"),
        text(f"{_frontier(frontier, record.tool_turns)}{window}"),
        text(f"body {body}; tool result text {tool_text}"),
    ]


def _cache_figures(tokens: CacheTokens) -> str:
    return (f"{tokens.read:,} read from the cache, {tokens.written:,} written to it, of "
            f"{tokens.input:,} input tokens")


def _cache(check: CacheCheck) -> list[ViewLine]:
    """The ledger's prediction of the provider's cache beside the provider's
    report, the two in the same terms: the prediction is an estimate, and a
    reader judges it by the report."""
    reported = (_cache_figures(check.reported) if check.reported is not None
                else "none (the answer has not reported its cache)")
    return [text(f"cache ({check.cache}) predicted: {_cache_figures(check.predicted)} "
                 "(estimated)"),
            text(f"cache reported by the provider: {reported}")]


def _frontier(frontier: int | None, tool_turns: int | None) -> str:
    """Where the frontier is, as the count of the tool turns behind it
    (the plan's frontier is the index of the first tool turn not behind it:
    only the results of the turns behind it may be masked)."""
    of_turns = f" of {number(tool_turns)}" if tool_turns is not None else ""
    if frontier is None:
        return "frontier: n/a"
    if frontier == 0:
        return (f"frontier: none of the {number(tool_turns)} tool turns may be masked"
                if tool_turns is not None else "frontier: no tool turn may be masked")
    return f"frontier: the first {number(frontier)}{of_turns} tool turns may be masked"


def _changed(explanation: MaskingExplanation) -> list[ViewLine]:
    changed = explanation.changed
    lines = [text(""), heading(f"Masked, clipped or recalled ({len(changed)}):")]
    if not changed:
        return [*lines, text("  none")]
    return lines + table(
        (r.decision or "", r.call_id, r.tool_name or "(no name)",
         sizes(r.chars_before, r.chars_after, "chars"))
        for r in changed)


def _kept(explanation: MaskingExplanation) -> list[ViewLine]:
    unchanged = explanation.unchanged
    lines = [text(""), heading(f"Kept as they came ({len(unchanged)}), by reason:")]
    if not unchanged:
        return [*lines, text("  none")]
    if explanation.reasons_note is not None:
        lines.extend(paragraph(f"(the reasons are not available: {explanation.reasons_note})",
                               "  "))
    for reason, results in explanation.kept_by_reason().items():
        meaning = REASON_MEANINGS[reason] if reason is not None else "reason not available"
        lines.append(text(f"  {reason or 'unknown'} ({len(results)}): {meaning}"))
        lines.extend(wrapped(r.call_id for r in results))
    return lines

