"""JSON-RPC 2.0 messages for the MCP truncation tests, and the cut they
should get, written out from the rule (head + marker + tail) apart from the
code under test."""

from __future__ import annotations

import json

from obsmask_core.mcp.cut import truncate_jsonrpc_text
from obsmask_core.mcp.limits import TruncationLimits

DEFAULTS = TruncationLimits()
# The default marker as README.md documents it ({recall} is empty with recall
# off, "; recall id=ID" with it on).
README_MARKER_TEMPLATE = (
    "\n... [OBSMASK_TRUNCATED original_chars={original_chars} head={head} tail={tail}{recall}]"
    " ...\n"
)
# The marker of the spec, before recall: the default renders exactly this
# with recall off.
PLAIN_MARKER_TEMPLATE = (
    "\n... [OBSMASK_TRUNCATED original_chars={original_chars} head={head} tail={tail}] ...\n"
)
MEGABYTE = 1_000_000


def numbered(n: int, tag: str = "") -> str:
    """``n`` characters in which every stretch of 8 or more is unique, so
    "the head is there" and "the middle is gone" mean something."""
    return "".join(f"{tag}{i:06d}." for i in range(n // 7 + 1))[:n]


# A string long enough to be cut with the default limits.
LONG = numbered(6000)


def marker_text(template: str, original_chars: int, head: int, tail: int,
                recall_id: str | None = None) -> str:
    """A marker written out from its template: the hint is "; recall id=ID"
    with an id, nothing without."""
    return template.format(
        original_chars=original_chars, head=head, tail=tail,
        recall="" if recall_id is None else "; recall id=" + recall_id,
        recall_id=recall_id or "",
    )


def expected_cut(text: str, limits: TruncationLimits = DEFAULTS, head: int | None = None,
                 tail: int | None = None, recall_id: str | None = None) -> str:
    """head + marker + tail, written out from the rule: the first
    ``head_chars`` characters (or ``head``), the marker, the last
    ``tail_chars`` (or ``tail``)."""
    head = limits.head_chars if head is None else head
    tail = limits.tail_chars if tail is None else tail
    marker = marker_text(limits.marker_template, len(text), head, tail, recall_id)
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def response(result: object, id_: object = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def error_response(error: dict[str, object], id_: object = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": id_, "error": error}


def truncated(message: object, limits: TruncationLimits = DEFAULTS) -> object:
    """The message after truncation, parsed (the test fails if nothing was cut)."""
    outcome = truncate_jsonrpc_text(json.dumps(message), limits)
    assert outcome.scan.problem is None
    assert outcome.text is not None, "nothing was cut"
    return json.loads(outcome.text)


def text_block(text: str) -> dict[str, object]:
    return {"type": "text", "text": text}
