"""Property-based tests for the three wire formats: on arbitrary conversations
the invariants hold in each format, and the same conversation written in
each format is masked with the same decisions (one model of tool turns, not
three copies of the algorithm)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, RESPONSES
from support.chat import LONG_OUTPUT
from support.formats import (
    FORMATS,
    Call,
    Event,
    Result,
    Say,
    Turn,
    changed_results,
    convert,
    result_values,
    skeleton,
)

IDS = ["call_a", "call_b", "call_c", "", "x"]
texts = st.one_of(
    st.sampled_from(
        ["ok", LONG_OUTPUT, "Traceback (most recent call last):\n  x\nKeyError: 'k'\n" + "y" * 200,
         json.dumps({"error": "bad", "pad": "z" * 200})]
    ),
    st.text(max_size=200),
)
plain_contents = st.one_of(texts, st.none(), st.integers())
block_contents = st.lists(
    st.one_of(
        st.fixed_dictionaries({"type": st.sampled_from(["text", "input_text"]), "text": texts}),
        st.just({"type": "image", "source": {"type": "base64", "data": "AAAA"}}),
        st.integers(),
    ),
    max_size=3,
)
policies = st.builds(
    MaskPolicy,
    refetch_guard=st.booleans(),
    enabled=st.booleans(),
    window_turns=st.integers(0, 4),
    keep_errors=st.booleans(),
    keep_last_k_per_tool=st.integers(0, 2),
)


@st.composite
def conversations(draw: st.DrawFn, contents: st.SearchStrategy[object],
                  with_errors: bool) -> list[Event]:
    events: list[Event] = []
    for _ in range(draw(st.integers(0, 20))):
        kind = draw(st.sampled_from(["turn", "result", "result", "say"]))
        if kind == "turn":
            calls = [
                Call(draw(st.one_of(st.sampled_from(IDS), st.none())),
                     draw(st.sampled_from(["bash", "read", None])))
                for _ in range(draw(st.integers(0, 3)))
            ]
            # Text before the calls: in Responses it separates this turn's
            # run of calls from a previous one.
            events.append(Turn(calls, text="thinking"))
        elif kind == "result":
            events.append(Result(
                draw(st.one_of(st.sampled_from(IDS), st.none(), st.integers())),
                draw(contents),
                is_error=with_errors and draw(st.booleans()),
            ))
        else:
            events.append(Say(draw(st.sampled_from(["user", "assistant"])), draw(texts)))
    return events


def decisions(fmt, events: list[Event], policy: MaskPolicy) -> list[tuple[str, str]]:
    items = convert(fmt, events)
    plan = plan_masking(fmt.index(items), policy, items)
    return [(d.call_id, d.new_text) for d in plan.decisions]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=conversations(plain_contents, with_errors=False), policy=policies)
def test_every_format_gets_the_same_decisions(events, policy):
    """The same conversation is masked alike in the three formats: same
    results, same placeholders (tool names from the matching calls)."""
    chat, anthropic, responses = (decisions(fmt, events, policy) for fmt in FORMATS)
    assert chat == anthropic == responses


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=conversations(st.one_of(plain_contents, block_contents), with_errors=True),
    policy=policies,
    junk=st.lists(st.tuples(st.integers(0, 40), st.sampled_from([3, "x", None, {"type": "?"}])),
                  max_size=2),
)
def test_the_invariants_hold_in_every_format(events, policy, junk):
    """In each format: the same items in the same order, every id and call
    unchanged, nothing changed but results' values; idempotent."""
    for fmt in FORMATS:
        before = convert(fmt, events)
        for position, item in junk:
            before.insert(min(position, len(before)), item)
        after = mask_items(before, policy, fmt)
        assert len(after) == len(before)
        assert skeleton(fmt, after) == skeleton(fmt, before)
        assert mask_items(after, policy, fmt) == after
        for call_id in changed_results(fmt, before, after):
            assert isinstance(call_id, str) and call_id


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=conversations(st.one_of(plain_contents, block_contents), with_errors=True),
    policy=policies,
    indent=st.sampled_from([None, 2]),
)
def test_body_rewrite_keeps_the_clients_formatting(events, policy, indent):
    """Anthropic and Responses bodies are rewritten like chat ones: only the
    masked values change, the rest keeps the client's formatting."""
    for fmt, member in ((ANTHROPIC, "messages"), (RESPONSES, "input")):
        items = convert(fmt, events)
        document = {"model": "m", member: items, "max_tokens": 10}
        original = json.dumps(document, indent=indent, ensure_ascii=False)
        outcome = mask_request_body(original.encode(), policy, fmt)
        expected = mask_items(items, policy, fmt)
        if expected == items:
            assert outcome.body is None
            continue
        assert outcome.body is not None, outcome.reason
        text = outcome.body.decode()
        assert json.loads(text) == {**document, member: expected}
        # Strings stay the client's: re-formatting with its settings only
        # differs inside replaced lists of blocks (written compactly).
        if all(isinstance(v, str) or v is None for _, v in result_values(fmt, items)):
            assert text == json.dumps({**document, member: expected}, indent=indent,
                                      ensure_ascii=False)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=conversations(st.one_of(plain_contents, block_contents), with_errors=True),
       fmt=st.sampled_from(FORMATS),
       cut=st.floats(0, 1), junk=st.lists(st.one_of(st.integers(), st.none()), max_size=2))
def test_an_index_resumed_from_a_prefix_is_the_index_of_the_whole_list(events, fmt, cut, junk):
    """A list that begins with the items of a kept index is indexed from
    there, its added items alone: the same turns, results, orphans and
    answers as indexing it whole; and the kept index is left as it was."""
    items = convert(fmt, events) + junk
    prefix = int(len(items) * cut)
    kept = fmt.index_items(items[:prefix], None)
    before = (repr(kept.index), dict(kept.declared), kept.items)
    resumed = fmt.index_items(items, kept)
    assert resumed.index == fmt.index(items)
    assert resumed.items == len(items)
    assert resumed.text_chars == sum(len(r.text) for r in resumed.index.results
                                     if r.text is not None)
    assert (repr(kept.index), kept.declared, kept.items) == before
