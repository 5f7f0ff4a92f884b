"""The content view's page of a masked request (``mitm/contentview.py``):
what the flow's metadata recorded of the masking, and the facts
``explain.py`` reads from the two bodies, laid out for a reader: a header,
the provider's cache, the re-fetches, each masked, clipped or recalled
result, the kept ones by reason, the flow's comment, and the diff.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from obsmask_core.conversation.billing.last_seen import Recorded
from obsmask_core.conversation.planning.judgements import KeptReason
from obsmask_core.conversation.planning.plan import CLIPPED, MASKED, RECALLED
from obsmask_core.conversation.settings.routes import FORMAT_TITLES
from obsmask_core.conversation.view.explain import (
    MaskingExplanation,
    NotExplained,
    ResultFacts,
)
from obsmask_core.conversation.view.explain_refetches import REFETCHED_MEANING, refetch_lines
from obsmask_core.shared.cache_check import CacheCheck, CacheTokens
from obsmask_core.shared.read_back import whole, word
from obsmask_core.shared.refetch_facts import REFETCHES_KEY, RefetchFacts
from obsmask_core.shared.request_record import BillKey, Key
from obsmask_core.shared.view_text import (
    DiffNames,
    ViewLine,
    closing_lines,
    heading,
    number,
    paragraph,
    sizes,
    table,
    text,
    title,
    wrapped,
)

# What each reason means, for a reader who has not read the README.
REASON_MEANINGS: Mapping[KeptReason, str] = MappingProxyType({
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
})
REASON_ORDER: tuple[KeptReason, ...] = tuple(REASON_MEANINGS)
_DIFF_NAMES = DiffNames(
    "request", "masked request", "items",
    missing=("The request as it went out (the original is not in the flow):",))


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
    # The request end from which the provider's brake held its frontier.
    braked_from: int | None = None
    # The request ends it came back at after a pause the cache may have
    # outlived (``last_seen``).
    doubtful_ends: frozenset[int] = frozenset()

    @classmethod
    def of(cls, metadata: Mapping[str, object]) -> MaskingRecord:
        def figure(key: str) -> int | None:
            return whole(metadata.get(key))

        return cls(word(metadata.get(Key.FORMAT)), word(metadata.get(Key.STAGE)),
                   figure(Key.FRONTIER_TURN), figure(Key.WINDOW_TURNS), figure(Key.TOOL_TURNS),
                   figure(Key.TOOL_RESULTS), figure(Key.BODY_BYTES_BEFORE),
                   figure(Key.BODY_BYTES_AFTER), figure(Key.TOOL_CHARS_BEFORE),
                   figure(Key.TOOL_CHARS_AFTER), CacheCheck.read(metadata),
                   _ends(metadata.get(Key.BILL), BillKey.COLD_ENDS),
                   RefetchFacts.read(metadata.get(REFETCHES_KEY)),
                   _braked_from(metadata.get(Key.BILL)),
                   _ends(metadata.get(Key.BILL), BillKey.DOUBTFUL_ENDS))


    def table(self) -> Recorded | None:
        """What the flow's planning found in the table of when
        conversations were last seen (None: nothing)."""
        if not (self.cold_ends or self.doubtful_ends) and self.braked_from is None:
            return None
        return Recorded(self.cold_ends, self.braked_from, self.doubtful_ends)


def _braked_from(bill: object) -> int | None:
    """The bill's ``braked_from``, a whole number, or None."""
    return whole(bill.get(BillKey.BRAKED_FROM)) if isinstance(bill, Mapping) else None


def _ends(bill: object, key: str) -> frozenset[int]:
    """The bill's ``cold_ends`` or ``doubtful_ends`` (``key``), each a
    whole number, or none."""
    ends = bill.get(key) if isinstance(bill, Mapping) else None
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
    explained = explanation if isinstance(explanation, MaskingExplanation) else None
    fmt = record.format or (explained.format if explained is not None else None)
    lines = [title(f"obsmask: masked request ({FORMAT_TITLES.get(fmt or '', fmt or '?')})")]
    if isinstance(explanation, NotExplained):
        lines.extend(paragraph(f"The results cannot be listed: {explanation.reason}."))
    else:
        lines.extend(_summary(explanation, record, original, masked))
    if record.cache is not None:
        lines.extend(_cache(record.cache))
    lines.extend(refetch_lines(record.refetches,
                               explained.refetches if explained is not None else None))
    if explained is not None:
        lines.extend(_changed(explained))
        lines.extend(_kept(explained))
    return lines + closing_lines(comment, _DIFF_NAMES, original, masked,
                                 explained.parts if explained is not None else None)


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
    for reason, results in _kept_by_reason(explanation.unchanged).items():
        meaning = REASON_MEANINGS[reason] if reason is not None else "reason not available"
        lines.append(text(f"  {reason or 'unknown'} ({len(results)}): {meaning}"))
        lines.extend(wrapped(r.call_id for r in results))
    return lines


def _kept_by_reason(unchanged: Sequence[ResultFacts],
                    ) -> dict[KeptReason | None, list[ResultFacts]]:
    """The unchanged results by reason, in REASON_ORDER (None last:
    reason unknown)."""
    grouped: dict[KeptReason | None, list[ResultFacts]] = {}
    for reason in (*REASON_ORDER, None):
        found = [r for r in unchanged if r.kept == reason]
        if found:
            grouped[reason] = found
    return grouped
