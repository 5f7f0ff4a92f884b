"""What MCP truncation did to one answer: each string it cut, where, its
length before and after and its recall id; the facts obsmask's content view
shows (``mitm/contentview.py``).

With the original answer (the flow's backup, kept for a buffered answer)
the two bodies are compared string by string. Without it, the cut strings
are the ones that hold a marker, and the marker says how long each was.
A body is a JSON-RPC message or batch, or an event stream whose events
carry them. When the original's messages line up with the cut answer's, the
page's diff is made message by message, of the messages that changed: its
work grows with them, not with the square of the body (mitmproxy renders a
view on its event loop). The answer's messages are read by
``answer_messages.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from obsmask_core.mcp.answer_messages import (
    Message,
    answer_messages,
    message_id,
    pretty_answer,
    strings_of,
)
from obsmask_core.shared.read_back import whole, word
from obsmask_core.shared.request_record import McpKey
from obsmask_core.shared.truncation import TruncationMarker
from obsmask_core.shared.view_text import (
    DiffNames,
    DiffPart,
    ViewLine,
    body_lines,
    closing_lines,
    comment_lines,
    heading,
    number,
    paragraph,
    pretty_body,
    pretty_value,
    sizes,
    table,
    text,
    title,
    wrapped,
)


@dataclass(frozen=True)
class CutFacts:
    """One cut string: the event that carries it (1 for the first; None in
    a JSON body), its message's id as JSON writes it (None: no id), its
    place in the message (``result.content[0].text``), its length before
    (None: not known) and after, and its recall id (None: recall was off)."""

    event: int | None
    message_id: str | None
    path: str
    chars_before: int | None
    chars_after: int
    recall_id: str | None


@dataclass(frozen=True)
class CutExplanation:
    """The cut strings of an answer, in order; ``compared`` says whether
    they come from comparing the answer with its original, and then
    ``parts`` are the messages that differ, in order, pretty-printed, for
    the page's diff."""

    cuts: tuple[CutFacts, ...]
    compared: bool
    parts: tuple[DiffPart, ...] = ()

    @property
    def chars_before(self) -> int | None:
        befores = [cut.chars_before for cut in self.cuts]
        return None if None in befores else sum(b for b in befores if b is not None)

    @property
    def chars_after(self) -> int:
        return sum(cut.chars_after for cut in self.cuts)


def explain_cuts(cut_body: str, original: str | None, marker: TruncationMarker, *,
                 event_stream: bool) -> CutExplanation:
    """The strings cut in ``cut_body``: those that differ from the same
    place of ``original`` when it is given (and holds the same messages),
    else those that hold a marker."""
    after = answer_messages(cut_body, event_stream)
    before = answer_messages(original, event_stream) if original is not None else None
    compared = before is not None and [e for e, _ in before] == [e for e, _ in after]
    cuts: list[CutFacts] = []
    for index, (event, message) in enumerate(after):
        originals = (dict(strings_of(before[index][1])) if compared and before is not None
                     else None)
        for path, value in strings_of(message):
            fields = marker.read(value)
            if originals is not None:
                was = originals.get(path)
                if was is None or was == value:
                    continue
                chars_before: int | None = len(was)
            elif fields is None:
                continue
            else:
                chars_before = fields.original_chars
            cuts.append(CutFacts(event, message_id(message), path, chars_before, len(value),
                                 fields.recall_id if fields is not None else None))
    parts = _changed_parts(before, after) if compared and before is not None else ()
    return CutExplanation(tuple(cuts), compared, parts)


def _changed_parts(before: list[Message], after: list[Message]) -> tuple[DiffPart, ...]:
    """The messages that differ (the two lists line up), each pretty-printed
    on its own and labelled with its event, its place and its id."""
    per_event = Counter(event for event, _ in after)
    seen: Counter[int | None] = Counter()
    parts: list[DiffPart] = []
    for (_, was), (event, went) in zip(before, after, strict=True):
        seen[event] += 1
        old, new = pretty_value(was), pretty_value(went)
        if old == new:
            continue
        place = [f"event {event}"] if event is not None else []
        if per_event[event] > 1:
            place.append(f"message {seen[event]} of {per_event[event]}")
        went_id = message_id(went)
        parts.append(DiffPart(f"{', '.join(place) or 'the message'} "
                              f"({'id ' + went_id if went_id is not None else 'no id'})",
                              old, new))
    return tuple(parts)


# The page -------------------------------------------------------------------------

# The headings of a page whose flow holds no original answer.
_NO_ORIGINAL = ("The original answer is not in the flow: no diff.", "The answer as it went out:")


@dataclass(frozen=True)
class CutRecord:
    """What the flow's metadata says of the cut (summary.McpSummary as
    saved); any figure may be missing (None)."""

    transport: str | None = None
    messages_truncated: int | None = None
    strings_cut: int | None = None
    chars_before: int | None = None
    chars_after: int | None = None
    tokens_saved: int | None = None
    recall_ids: tuple[str, ...] = ()

    @classmethod
    def of(cls, metadata: Mapping[str, object]) -> CutRecord:
        def figure(key: str) -> int | None:
            return whole(metadata.get(key))

        ids = metadata.get(McpKey.RECALL_IDS)
        return cls(word(metadata.get(McpKey.TRANSPORT)), figure(McpKey.MESSAGES_TRUNCATED),
                   figure(McpKey.STRINGS_CUT), figure(McpKey.CHARS_BEFORE),
                   figure(McpKey.CHARS_AFTER), figure(McpKey.TOKENS_SAVED),
                   tuple(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else ())

    def figures(self) -> str:
        return (f"{number(self.strings_cut)} string(s) cut in {number(self.messages_truncated)} "
                f"response(s): {sizes(self.chars_before, self.chars_after, 'chars')}"
                + (f", {number(self.tokens_saved)} tokens saved"
                   if self.tokens_saved is not None else ""))


def cut_page(explanation: CutExplanation, record: CutRecord, cut_body: str,
             original: str | None, *, event_stream: bool,
             comment: Sequence[str] = ()) -> list[ViewLine]:
    """The view of a cut MCP answer: the record, each cut string, the
    flow's comment, and the diff of the original and the cut answer:
    message by message when the explanation lined them up, else whole,
    when not too large."""
    kind = "event stream" if event_stream else "JSON"
    lines = [title(f"obsmask: cut MCP answer ({kind})"), text(record.figures())]
    lines.append(text(""))
    lines.append(heading(f"Cut strings ({len(explanation.cuts)}):"))
    if not explanation.compared:
        why = ("the original answer is not in the flow" if original is None else
               "the original answer's messages do not line up with the cut answer's")
        lines.append(text(f"  (read from the markers: {why})"))
    if explanation.cuts:
        lines.extend(table(
            ((f"event {cut.event}" if cut.event is not None else "")
             + (" " if cut.event is not None else "") + f"id {cut.message_id or '(none)'}",
             cut.path, sizes(cut.chars_before, cut.chars_after, "chars"),
             f"recall id {cut.recall_id}" if cut.recall_id else "no recall id")
            for cut in explanation.cuts))
    else:
        lines.append(text("  none found"))
    names = DiffNames("answer", "cut answer", "messages", _NO_ORIGINAL, kind)
    return lines + closing_lines(comment, names, original, cut_body,
                                 explanation.parts if explanation.compared else None,
                                 lambda body: pretty_answer(body, event_stream))


def streamed_page(record: CutRecord, request_body: str,
                  comment: Sequence[str] = ()) -> list[ViewLine]:
    """The view of the request of a flow whose streamed answer was cut:
    mitmproxy keeps no body of a streamed answer, so only the record can
    be shown (on the request, since the answer has no content to view)."""
    lines = [
        title("obsmask: the MCP answer to this request was cut as it streamed"),
        text(record.figures()),
        *paragraph("mitmproxy keeps no body of a streamed answer: the cut strings and the "
                   "original cannot be shown, only what obsmask recorded."),
    ]
    if record.recall_ids:
        lines.append(text("Recall ids of the cut strings:"))
        lines.extend(wrapped(record.recall_ids, indent="  "))
    lines.extend(comment_lines(comment))
    lines.append(text(""))
    lines.append(heading("The request:"))
    lines.extend(body_lines(pretty_body(request_body)))
    return lines
