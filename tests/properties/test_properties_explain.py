"""Property-based tests of the content view's explanation
(``conversation/view/explain.py``): on arbitrary conversations, in every format
and under any policy (clipping included), the explanation of a masked body
agrees with the plan that made it, result by result, the diff alone
finds the same changes, and the page's diff pairs exactly the items that
hold them."""

from __future__ import annotations

import json
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.view.explain import MaskingExplanation, explain_masking
from support.chat import LONG_OUTPUT
from support.formats import FORMATS, Call, Event, Result, Say, Turn, convert

texts = st.one_of(
    st.sampled_from([
        "ok", LONG_OUTPUT, LONG_OUTPUT + "\nmore", "Traceback (most recent call last):\n  x\n"
        "KeyError: 'k'\n" + "y" * 200, json.dumps({"error": "bad", "pad": "z" * 200})]),
    st.text(max_size=300),
)
contents = st.one_of(
    texts, st.none(),
    st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "input_text"]),
                                    "text": texts}), min_size=1, max_size=2),
)
policies = st.builds(
    MaskPolicy,
    refetch_guard=st.booleans(),
    window_turns=st.integers(0, 4),
    keep_errors=st.booleans(),
    keep_last_k_per_tool=st.integers(0, 2),
    min_chars=st.sampled_from([0, 100]),
    exclude_tools=st.sampled_from([(), ("read",)]),
    max_input_tokens=st.sampled_from([0, 300, 2000]),
    clip_head_chars=st.sampled_from([50, 2000]),
    clip_tail_chars=st.sampled_from([0, 50]),
    batch_turns=st.integers(1, 3),
    price_model=st.sampled_from(["none", "anthropic"]),
)


@st.composite
def conversations(draw: st.DrawFn) -> list[Event]:
    """Tool turns, each mostly followed by its results (long ones most of
    the time), with ids now and then reused, results of no call, and other
    messages in between."""
    events: list[Event] = [Say("user", "Fix the bug.")]
    for turn in range(draw(st.integers(0, 10))):
        ids = [draw(st.sampled_from([f"call_{turn}_{n}", "call_0_0", "x"])) for n in
               range(draw(st.integers(1, 2)))]
        events.append(Turn([Call(i, draw(st.sampled_from(["bash", "bash", "read"])))
                            for i in ids], text="thinking"))
        for call_id in ids:
            if draw(st.integers(0, 9)):
                events.append(Result(call_id, draw(st.one_of(
                    st.just(LONG_OUTPUT + f"\n({turn})"), contents))))
        if not draw(st.integers(0, 4)):
            events.append(draw(st.one_of(
                st.builds(Result, st.just("nobody"), texts),
                st.builds(Say, st.sampled_from(["user", "assistant"]), texts))))
    return events


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=conversations(), policy=policies, fmt=st.sampled_from(FORMATS))
def test_the_explanation_agrees_with_the_plan_result_by_result(events, policy, fmt):
    original = json.dumps({"model": "m", fmt.list_member: convert(fmt, events)}).encode()
    outcome = mask_request_body(original, policy, fmt)
    if not isinstance(outcome, Masked):
        return
    plan = outcome.plan
    explanation = explain_masking(original, outcome.body, fmt, policy)
    assert isinstance(explanation, MaskingExplanation)
    assert explanation.reasons_note is None and explanation.stage == plan.stage
    decisions = {d.location: d.kind for d in plan.decisions}
    assert {r.location: r.decision for r in explanation.changed} == decisions
    assert all(r.kept == plan.kept_at[r.location] for r in explanation.unchanged)
    # Every result and orphan once; the plan's counts are the reasons recorded.
    assert len({r.location for r in explanation.results}) == len(explanation.results)
    assert len(explanation.results) == plan.tool_results + plan.kept["orphan"]
    assert Counter(plan.kept_at.values()) == +plan.kept
    # Without the settings, the diff finds the same changes.
    alone = explain_masking(original, outcome.body, fmt, None)
    assert isinstance(alone, MaskingExplanation) and alone.reasons_note is not None
    assert {r.location: r.decision for r in alone.changed} == decisions
    # The page's diff: one part per item that holds a changed result, in
    # order, each labelled with its place and the ids of its changed results.
    items = sorted({location[0] for location in decisions})
    assert [part.label.split(" ")[0] for part in explanation.parts] == [
        f"{fmt.list_member}[{item}]" for item in items]
    for part, item in zip(explanation.parts, items, strict=True):
        ids = [r.call_id for r in explanation.changed if r.location[0] == item]
        assert part.label == f"{fmt.list_member}[{item}] ({', '.join(ids)})"
        assert part.before != part.after
