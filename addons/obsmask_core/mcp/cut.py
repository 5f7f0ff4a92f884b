"""Cut the long strings of JSON-RPC 2.0 responses to head + marker + tail.

Every string longer than ``max_chars`` (the response's own limit:
``obsmask_core.mcp.tool_limits``) inside a response's ``result`` or
``error.data`` is cut, at any depth, without breaking the JSON-RPC envelope
or the MCP schema (``obsmask_core.mcp.jsonrpc_scan`` says which strings may
be cut). Only the string tokens that are cut are decoded and replaced in
place, so everything else reaches the client byte for byte, formatting
included.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar, Protocol

from obsmask_core.mcp.jsonrpc_message import JsonRpcScan
from obsmask_core.mcp.jsonrpc_scan import scan_jsonrpc
from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.mcp.scope import EVERY_RESPONSE, McpAnswers
from obsmask_core.mcp.tool_limits import AnswerLimits, Limit, ToolLimits
from obsmask_core.shared.json_text import Span, splice
from obsmask_core.shared.recall_text import store_id
from obsmask_core.shared.truncation import TruncationMarker, truncate_text

KEEP_REMOVED_CHARS = 1_000_000


class Sizes(Protocol):
    """A limit: TruncationLimits, or one response's Limit."""

    @property
    def max_chars(self) -> int: ...
    @property
    def head_chars(self) -> int: ...
    @property
    def tail_chars(self) -> int: ...


def cut_with_id(text: str, limit: Sizes, marker: TruncationMarker,
                recall: bool = False) -> tuple[str, str | None] | None:
    """``text`` as head + marker + tail with its recall id (``store_id`` of
    the whole text, in the marker, when ``recall``; else None), or None
    when it stays whole: not longer than ``max_chars`` (or ``max_chars``
    is 0), already cut, or not shortened by cutting."""
    if not limit.max_chars or len(text) <= limit.max_chars:
        return None
    recall_id = store_id(text) if recall else None
    cut = truncate_text(text, limit.head_chars, limit.tail_chars, marker, recall_id)
    return None if cut is text else (cut, recall_id)


def cut_string(text: str, limit: Sizes, marker: TruncationMarker,
               recall: bool = False) -> str | None:
    """``text`` as head + marker + tail, or None when it stays whole (see
    cut_with_id)."""
    cut = cut_with_id(text, limit, marker, recall)
    return None if cut is None else cut[0]


@dataclass
class StringCut:
    """One string that was cut: where in which message, its sizes, and (with
    recall on) its recall id and the whole string, for the store."""

    message: int  # index in JsonRpcScan.messages
    chars_before: int
    chars_after: int
    # The middle that is gone, for counting the tokens saved; None when
    # longer than KEEP_REMOVED_CHARS (counting it would hold the proxy up,
    # and keeping it would double the memory of a huge answer).
    removed: str | None
    head: int = 0  # the characters kept of its start and its end
    tail: int = 0
    recall_id: str | None = None  # None: recall is off
    original: str | None = None  # the whole string, only with recall on


@dataclass
class TextTruncation:
    """The outcome for one JSON text: ``text`` is the new text, or None when
    the original must go out unchanged (``scan.problem`` or nothing to cut)."""

    scan: JsonRpcScan
    text: str | None
    cuts: list[StringCut]

    @property
    def chars_before(self) -> int:
        return sum(cut.chars_before for cut in self.cuts)

    @property
    def chars_after(self) -> int:
        return sum(cut.chars_after for cut in self.cuts)


def uniform_limits(limits: TruncationLimits) -> AnswerLimits:
    """The same limit for every response: ``max_chars`` and its head and
    tail, no rule."""
    return AnswerLimits(ToolLimits(limits.max_chars, limits.head_chars, limits.tail_chars))


def truncate_jsonrpc_text(
    text: str, limits: TruncationLimits, marker: TruncationMarker | None = None,
    answers: McpAnswers = EVERY_RESPONSE, *, per_message: AnswerLimits | None = None,
    recall: bool = False,
) -> TextTruncation:
    """Cut every long string of the responses in ``text`` (one JSON-RPC
    message or a batch) that ``answers`` covers; the rest of the text is
    kept byte for byte. Each response is cut at its own limit
    (``per_message``; by default ``limits``' max_chars for all). With
    ``recall``, each cut string carries its recall id and its original."""
    marker = marker or TruncationMarker(limits.marker_template)
    per_message = per_message or uniform_limits(limits)
    # One scan finds the strings over the smallest limit in force; each
    # response then keeps only those over its own.
    scan = scan_jsonrpc(text, per_message.scan_chars, per_message.skip_runs)
    if scan.problem is not None or not scan.spans:
        return TextTruncation(scan, None, [])
    replacements: list[tuple[Span, str]] = []
    cuts: list[StringCut] = []
    message_limits: dict[int, Limit] = {}
    for start, end, message in scan.spans:
        if not answers.covers(scan.messages[message]):
            continue
        limit = message_limits.get(message)
        if limit is None:
            limit = message_limits[message] = per_message.of(scan.messages[message])
        if not limit.max_chars or end - start - 2 <= limit.max_chars:
            continue  # the value is never longer than its escaped text
        # Taken from the scan, which outlives the cut in its outcome: a huge
        # string is not kept twice.
        value = scan.values.pop(start, None)
        if value is None:  # a short string, read by the scan without decoding
            value = json.loads(text[start:end])
            assert isinstance(value, str)
        outcome = cut_with_id(value, limit, marker, recall)
        if outcome is None:
            continue
        cut, recall_id = outcome
        encoded = json.dumps(cut, ensure_ascii=False)
        try:
            encoded.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate escape: keep it escaped
            encoded = json.dumps(cut)
        replacements.append(((start, end), encoded))
        head, tail = limit.head_chars, limit.tail_chars
        removed = len(value) - head - tail
        cuts.append(StringCut(
            message, len(value), len(cut),
            value[head : len(value) - tail] if removed <= KEEP_REMOVED_CHARS else None,
            head, tail, recall_id, value if recall_id is not None else None))
    if not cuts:
        return TextTruncation(scan, None, [])
    return TextTruncation(scan, splice(text, replacements), cuts)


@dataclass(frozen=True)
class Cut:
    """The new body, and what was cut."""

    body: bytes
    truncation: TextTruncation
    reason: ClassVar[str] = "truncated"


@dataclass(frozen=True)
class NothingToCut:
    """A JSON-RPC body with no string long enough: the original goes out."""

    truncation: TextTruncation
    body: ClassVar[None] = None
    reason: ClassVar[str] = "no string to cut"


@dataclass(frozen=True)
class NotJsonRpc:
    """A body that is not JSON-RPC 2.0 (``reason`` says why): the original
    goes out."""

    reason: str
    body: ClassVar[None] = None


BodyTruncation = Cut | NothingToCut | NotJsonRpc


def truncate_jsonrpc_body(
    body: bytes, limits: TruncationLimits, marker: TruncationMarker | None = None,
    answers: McpAnswers = EVERY_RESPONSE, *, per_message: AnswerLimits | None = None,
    recall: bool = False,
) -> BodyTruncation:
    """truncate_jsonrpc_text for a UTF-8 body."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        return NotJsonRpc(f"body is not valid UTF-8 (byte {e.start})")
    outcome = truncate_jsonrpc_text(text, limits, marker, answers, per_message=per_message,
                                    recall=recall)
    if outcome.scan.problem is not None:
        return NotJsonRpc(outcome.scan.problem)
    if outcome.text is None:
        return NothingToCut(outcome)
    return Cut(outcome.text.encode("utf-8"), outcome)
