"""One request body masked with a policy: what it saves (tool results,
characters, tokens) and what it costs (the masking's time against a plain
json.loads + json.dumps of the same body, the floor of any design that
parses and rewrites a request)."""

from __future__ import annotations

import json
from typing import TypedDict, TypeGuard

from benchlib.errors import BenchError
from benchlib.timing import median_ms
from obsmask_core.conversation.body.request_text import loads
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked, Unchanged
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.shared.message_tokens import estimate_input_tokens
from obsmask_core.shared.tokens import TokenCounter


class RequestFigures(TypedDict):
    format: str
    tool_turns: int
    tool_results: int
    masked_tool_results: int
    kept: dict[str, int]  # results left as they were, per reason
    tool_chars_before: int
    tool_chars_after: int
    tokens_before: int
    tokens_after: int
    body_bytes_before: int
    body_bytes_after: int
    mask_ms: float
    json_roundtrip_ms: float


class SkippedRequest(TypedDict):
    format: str
    skipped: str  # why obsmask could not read it


def is_measured(figures: RequestFigures | SkippedRequest) -> TypeGuard[RequestFigures]:
    return "skipped" not in figures


def _tokens(document: dict[str, object], fmt: WireFormat, counter: TokenCounter) -> int:
    items = document[fmt.list_member]
    tokens = estimate_input_tokens(items, counter) if isinstance(items, list) else None
    if tokens is None:
        raise BenchError(f"tokens could not be counted: {counter.failure}")
    return tokens


def _tool_chars(items: object, fmt: WireFormat) -> int:
    """Characters of the tool results' text (as masking counts them)."""
    if not isinstance(items, list):
        return 0
    return sum(len(result.text) for result in fmt.index(items).results
               if result.text is not None)


def measure(
    body: bytes, fmt: WireFormat, policy: MaskPolicy, counter: TokenCounter, repeat: int
) -> RequestFigures | SkippedRequest:
    masker = Masker(policy)
    outcome = masker.mask(body, fmt)
    if isinstance(outcome, Masked):
        plan = outcome.plan
        before = loads(body.decode("utf-8", "replace"))
        after = loads(outcome.body.decode())
        chars_before, chars_after = outcome.tool_chars_before, outcome.tool_chars_after
    elif isinstance(outcome, Unchanged) and outcome.plan is not None:  # nothing to mask
        plan = outcome.plan
        before = after = loads(body.decode("utf-8", "replace"))
        chars_before = chars_after = (
            _tool_chars(before.get(fmt.list_member), fmt) if isinstance(before, dict) else 0)
    else:
        return {"format": fmt.name, "skipped": outcome.reason}
    if not isinstance(before, dict) or not isinstance(after, dict):
        return {"format": fmt.name, "skipped": outcome.reason}
    return {
        "format": fmt.name,
        "tool_turns": plan.tool_turns,
        "tool_results": plan.tool_results,
        "masked_tool_results": plan.masked,
        "kept": dict(sorted(plan.kept.items())),
        "tool_chars_before": chars_before,
        "tool_chars_after": chars_after,
        "tokens_before": _tokens(before, fmt, counter),
        "tokens_after": _tokens(after, fmt, counter),
        "body_bytes_before": len(body),
        "body_bytes_after": len(outcome.body) if outcome.body is not None else len(body),
        "mask_ms": median_ms(lambda: masker.mask(body, fmt), repeat),
        "json_roundtrip_ms": median_ms(lambda: json.dumps(json.loads(body)), repeat),
    }
