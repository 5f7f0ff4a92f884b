"""The rules that look at a tool result alone: why it is kept whatever its
age, or the text it is masked to (a placeholder, with the blocks that must
survive masking)."""

from __future__ import annotations

from collections import Counter

from obsmask_core.conversation.planning.error_heuristic import looks_like_error
from obsmask_core.conversation.planning.judgements import Judgement, KeptReason
from obsmask_core.conversation.settings.policy import MaskPolicy, render_placeholder
from obsmask_core.conversation.turns.turn_model import ToolResult, ToolTurnIndex


def preserved_blocks(text: str, patterns: tuple[tuple[str, str], ...]) -> list[str]:
    """The blocks from a begin marker to its end marker (both included), in
    the order they appear; they survive masking (structured results, such as
    a sub-agent's dispatch report, that the model must keep)."""
    found: list[tuple[int, str]] = []
    for begin, end in patterns:
        start = text.find(begin)
        while start >= 0:
            stop = text.find(end, start + len(begin))
            if stop < 0:
                break
            found.append((start, text[start : stop + len(end)]))
            start = text.find(begin, stop + len(end))
    return [block for _, block in sorted(found)]


def _masked_text(placeholder: str, blocks: list[str]) -> str:
    return placeholder + "".join("\n" + block for block in blocks)


def _is_masked(text: str, result: ToolResult, policy: MaskPolicy) -> bool:
    """Is ``text`` already what masking would make of this result?"""
    if policy.matcher.matches(text, result.call_id, result.tool_name):
        return True
    blocks = preserved_blocks(text, policy.preserve_patterns)
    suffix = _masked_text("", blocks)
    return bool(blocks) and text.endswith(suffix) and policy.matcher.matches(
        text[: len(text) - len(suffix)], result.call_id, result.tool_name
    )


def judge(result: ToolResult, policy: MaskPolicy, recallable: bool) -> Judgement:
    reason = _static_reason(result, policy)
    if reason is not None:
        return reason, None
    assert result.text is not None
    placeholder = render_placeholder(
        policy.placeholder_template, result.call_id, result.tool_name, len(result.text),
        recall=recallable,
    )
    blocks = preserved_blocks(result.text, policy.preserve_patterns)
    new_text = _masked_text(placeholder, blocks)
    if len(new_text) < len(result.text):
        return None, new_text
    return "short", None  # a placeholder must save something


def recallable_ids(index: ToolTurnIndex) -> frozenset[str]:
    """The call ids that name one result of the request (some clients reuse
    ids such as call_0 in every turn: a recall of one could not tell which)."""
    counts = Counter(result.call_id for result in index.results)
    return frozenset(call_id for call_id, count in counts.items() if count == 1)


def _static_reason(result: ToolResult, policy: MaskPolicy) -> KeptReason | None:
    """Why a result is never masked, whatever its age (None: it may be)."""
    text = result.text
    if text is None:
        return "not_text"  # nothing masking knows how to replace
    if _is_masked(text, result, policy):
        return "already_masked"
    if result.tool_name is not None and result.tool_name in policy.exclude_tools:
        return "excluded"
    if len(text) < policy.min_chars:
        return "min_chars"
    if policy.keep_errors and (result.is_error or looks_like_error(text)):
        return "error"
    return None
