"""Why a conversation request went out with nothing masked, as the log and
the flow say it (conversation/view/unmasked.py): the reason a user can act
on, and each kind of reason said once per conversation."""

from __future__ import annotations

from collections import Counter

from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.view.unmasked import UnmaskedReasons, why_unmasked


def plan(results: int = 3, conversation: str | None = "c-1", held_out: bool = False,
         **kept: int) -> MaskPlan:
    return MaskPlan(tool_results=results, kept=Counter(kept), held_out=held_out,
                    conversation=conversation)


def test_a_conversation_in_the_holdout_group_says_it_is_held_out():
    why = why_unmasked(plan(held_out=True, in_window=3), 1)
    assert why.kind == "held_out" and "holdout_percent" in why.text


def test_a_request_with_no_tool_result_says_so():
    assert why_unmasked(plan(results=0), 1).text == "no tool result yet"


def test_results_all_inside_the_window_are_nothing_old_enough():
    why = why_unmasked(plan(in_window=3), 8)
    assert why.text == ("nothing old enough: 3 tool result(s), all inside the window of 8 "
                        "tool turn(s)")


def test_results_past_the_window_are_counted_by_reason_the_commonest_first():
    why = why_unmasked(plan(results=7, in_window=1, error=1, pending=4, cache=1,
                            orphan=0), 1)
    assert why.kind == "pending"
    assert why.text.startswith("6 tool result(s) past the window kept: 4 waiting for the "
                               "frontier")
    assert "; 1 read as errors (keep_errors)" in why.text
    assert "orphan" not in why.text and "earlier call" not in why.text


def test_each_kind_of_reason_is_news_once_per_conversation():
    reasons = UnmaskedReasons()
    first = reasons.of(plan(in_window=3), 8)
    assert first[1] and first[0] is not None
    assert reasons.of(plan(results=4, in_window=4), 8)[1] is False
    # Another reason for the same conversation, or another conversation, is news.
    assert reasons.of(plan(results=5, in_window=1, pending=4), 1)[1] is True
    assert reasons.of(plan(conversation="c-2", in_window=3), 8)[1] is True


def test_without_a_plan_or_a_conversation_nothing_is_news():
    reasons = UnmaskedReasons()
    assert reasons.of(None, 8) == (None, False)
    assert reasons.of(plan(conversation=None, in_window=3), 8)[1] is False


def test_the_reasons_remembered_are_bounded():
    reasons = UnmaskedReasons(at_most=2)
    assert [reasons.of(plan(conversation=f"c-{n}", in_window=3), 8)[1]
            for n in range(4)] == [True, True, False, False]
