"""What the content view says of a request's re-fetches (``refetch``): the
calls of the model's newest answer that fetched again a result masking had
taken, the earlier call each repeats, and what they cost.

Which calls are re-fetches is the flow's record (``RefetchFacts``, read
back by ``shared.refetch_facts``): the detection is not run again here. The
earlier call is found in the original request: the latest call before the
newest answer with the same tool and arguments (``tool_calls``), the one
the detection compared the re-fetch with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.conversation.turns.tool_calls import calls_of
from obsmask_core.conversation.turns.turn_model import ToolTurnIndex
from obsmask_core.shared.refetch_facts import RefetchFacts
from obsmask_core.shared.view_text import ViewLine, heading, table, text

REFETCHED_MEANING = ("its call was made again after its result was masked (refetch_guard): "
                     "the model needed it, so it stays whole from then on")


@dataclass(frozen=True)
class RefetchedCall:
    """A re-fetch of the newest answer, and the call it repeats (None: not
    found in the request); ``earlier_turn`` counts tool turns from 0."""

    call_id: str
    tool_name: str | None
    earlier_call_id: str | None = None
    earlier_turn: int | None = None


def refetched_calls(items: Sequence[object], index: ToolTurnIndex,
                    call_ids: Sequence[str]) -> tuple[RefetchedCall, ...]:
    """The calls ``call_ids`` of the newest answer, each with the latest
    earlier call that is the same; in the order of ``call_ids``."""
    if not call_ids or not index.answer_starts:
        return ()
    newest = index.answer_starts[-1]
    earlier: dict[bytes, tuple[int, str]] = {}  # by key: the turn and id of its latest call
    found: dict[str, RefetchedCall] = {}
    wanted = set(call_ids)
    for number, turn in enumerate(index.turns):
        calls = calls_of(items, turn)
        if turn.location[0] < newest:
            for call_id, _, key, _ in calls:
                earlier[key] = (number, call_id)
            continue
        for call_id, tool_name, key, _ in calls:
            if call_id in wanted and call_id not in found:
                before = earlier.get(key)
                found[call_id] = RefetchedCall(call_id, tool_name,
                                               before[1] if before else None,
                                               before[0] if before else None)
    return tuple(found.get(call_id) or RefetchedCall(call_id, None) for call_id in call_ids)


def refetch_lines(facts: RefetchFacts | None,
                  calls: Sequence[RefetchedCall] | None) -> list[ViewLine]:
    """The page's part on re-fetches: none when the conversation has none
    and the guard keeps nothing. ``calls`` None: the request could not be
    read, the record's call ids are listed alone."""
    if not facts:
        return []
    lines = [text(""), heading(f"Re-fetches new in this request ({facts.new}): calls the "
                               "model made again after masking took their earlier result:")]
    listed = calls if calls is not None else [RefetchedCall(c, None) for c in facts.new_calls]
    if listed:
        lines += table((c.call_id, c.tool_name or "(tool not found)", _repeats(c))
                       for c in listed)
        lines.append(text(f"  their results: {facts.result_tokens:,} tokens (estimated); "
                          + ("the answer made nothing else: an extra model turn"
                             if facts.extra_turns else "the answer made other calls too")))
    else:
        lines.append(text("  none"))
    lines.append(text(f"  in the conversation so far: {facts.in_conversation:,} re-fetch(es); "
                      f"results the guard keeps here (refetched): {facts.guarded_results:,}"))
    return lines


def _repeats(call: RefetchedCall) -> str:
    if call.earlier_call_id is None or call.earlier_turn is None:
        return "repeats an earlier call (not found in the request)"
    return f"repeats {call.earlier_call_id} (tool turn {call.earlier_turn + 1})"
