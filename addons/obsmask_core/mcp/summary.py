"""What MCP truncation did to one answer (or stream), for the flow's
metadata, its comment and the log."""

from __future__ import annotations

from dataclasses import dataclass, field

from obsmask_core.mcp.cut import TextTruncation
from obsmask_core.shared.request_record import TRUNCATED, McpKey
from obsmask_core.shared.tokens import TokenCount, TokenCounter
from obsmask_core.shared.truncation import TruncationMarker

COMMENT_PREFIX = "obsmask: cut "
# A GET stream may live for days: its flow keeps the ids of its latest cuts.
MAX_RECALL_IDS = 100


@dataclass(frozen=True)
class MessageCut:
    """The strings cut in one JSON-RPC response, for its log line."""

    id_text: str | None
    strings: int
    chars_before: int
    chars_after: int

    def log_line(self, where: str) -> str:
        return (f"MCP response id={self.id_text} ({where}): cut {self.strings} "
                f"string{'' if self.strings == 1 else 's'}, "
                f"{self.chars_before:,} -> {self.chars_after:,} chars")


@dataclass
class McpSummary:
    """The running totals of one flow: a buffered answer adds once, a stream
    once per rewritten event. ``tokens_saved`` is None once any part could
    not be counted (the encoding was loading). A cut string is seen once, so
    it is never counted while the answer waits: its tokens are estimated
    from its length at the ratio of what was counted (``tokens_estimated``),
    and a sample of it is counted in the background to keep that ratio true."""

    transport: str
    messages_truncated: int = 0
    strings_cut: int = 0
    chars_before: int = 0
    chars_after: int = 0
    tokens_saved: int | None = 0
    token_encoding: str = "loading"
    tokens_estimated: bool = False
    last_messages: list[MessageCut] = field(default_factory=list)
    # The recall ids of the strings cut (with recall on), each once, in
    # order; the last MAX_RECALL_IDS of them.
    recall_ids: dict[str, None] = field(default_factory=dict)

    def add(self, truncations: list[TextTruncation], marker: TruncationMarker,
            tokens: TokenCounter) -> list[MessageCut]:
        """Add the cuts of some texts; the messages they cut, for the log."""
        messages: list[MessageCut] = []
        for truncation in truncations:
            self.recall_ids.update((cut.recall_id, None) for cut in truncation.cuts
                                   if cut.recall_id is not None)
            while len(self.recall_ids) > MAX_RECALL_IDS:  # a long-lived stream
                del self.recall_ids[next(iter(self.recall_ids))]
            by_message: dict[int, tuple[int, int, int]] = {}
            for cut in truncation.cuts:
                strings, before, after = by_message.get(cut.message, (0, 0, 0))
                by_message[cut.message] = (
                    strings + 1, before + cut.chars_before, after + cut.chars_after)
            messages.extend(
                MessageCut(truncation.scan.messages[index].id_text, *figures)
                for index, figures in by_message.items())
            self.messages_truncated += len(by_message)
            self.strings_cut += len(truncation.cuts)
            self.chars_before += truncation.chars_before
            self.chars_after += truncation.chars_after
            saved = tokens_saved(truncation, marker, tokens)
            self.tokens_saved = None if saved is None or self.tokens_saved is None else (
                self.tokens_saved + saved.tokens)
            self.tokens_estimated |= saved is not None and saved.estimated
        self.token_encoding = tokens.encoding_label
        return messages

    def as_metadata(self) -> dict[str, object]:
        recall: dict[str, object] = (
            {McpKey.RECALL_IDS: list(self.recall_ids)} if self.recall_ids else {})
        return {
            McpKey.ACTION: TRUNCATED,
            McpKey.TRANSPORT: self.transport,
            McpKey.MESSAGES_TRUNCATED: self.messages_truncated,
            McpKey.STRINGS_CUT: self.strings_cut,
            McpKey.CHARS_BEFORE: self.chars_before,
            McpKey.CHARS_AFTER: self.chars_after,
            McpKey.TOKENS_SAVED: self.tokens_saved,
            McpKey.TOKEN_ENCODING: self.token_encoding,
            **({McpKey.TOKENS_ESTIMATED: True} if self.tokens_estimated else {}),
            **recall,
        }

    def comment_line(self) -> str:
        return (
            f"{COMMENT_PREFIX}{self.strings_cut} long string(s) in "
            f"{self.messages_truncated} MCP response(s): "
            f"{self.chars_before:,} -> {self.chars_after:,} chars"
            + (f", {self.tokens_saved:,} tokens saved ({self.token_encoding}"
               f"{', estimated' if self.tokens_estimated else ''})"
               if self.tokens_saved is not None else "")
        )


def tokens_saved(truncation: TextTruncation, marker: TruncationMarker,
                 tokens: TokenCounter) -> TokenCount | None:
    """Tokens of the text cut away, minus the markers; None while the
    encoding loads."""
    removed = [cut.removed for cut in truncation.cuts]
    if any(text is None for text in removed):
        return None
    cut_away = tokens.count_or_estimate((text for text in removed if text is not None),
                                        remember=False)
    markers = tokens.count_or_estimate(
        (marker.render(cut.chars_before, cut.head, cut.tail, cut.recall_id)
         for cut in truncation.cuts), remember=False)
    if cut_away is None or markers is None:
        return None
    return TokenCount(cut_away.tokens - markers.tokens, cut_away.estimated or markers.estimated)
