"""Properties of conversation recall over whole sessions: whatever results
the model recalls and when, in any of the three formats and under any
policy, every request keeps the rules of masking, a recalled result carries
exactly the part of the original it asks for, and masking stays monotone:
a result's outgoing value changes at most once (whole to masked), and
never comes back."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.body.request_text import loads
from obsmask_core.conversation.masking.outcomes import Masked, Unchanged
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.shared.recall_text import RecallQuery
from support.formats import (
    FORMATS,
    Call,
    Event,
    Result,
    Say,
    Turn,
    convert,
    result_values,
    skeleton,
    text_of,
)

RECALL_TOOL = "mcp__obsmask__recall"


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[list[Event]], dict[str, RecallQuery], dict[str, str]]:
    """A session as the requests a client sends (each the history so far),
    the recall calls in it with their queries, and every original text."""
    events: list[Event] = [Say("user", "Fix the bug.")]
    requests: list[list[Event]] = []
    queries: dict[str, RecallQuery] = {}
    texts: dict[str, str] = {}
    for turn in range(draw(st.integers(2, 9))):
        earlier = [call_id for call_id in texts if call_id not in queries]
        if earlier and draw(st.booleans()):
            call_id = f"recall_{turn}"
            target = draw(st.sampled_from([*earlier, "call_never"]))
            first = draw(st.none() | st.integers(1, 40))
            last = draw(st.none() | st.integers(first or 1, 60))
            pattern = draw(st.none() | st.sampled_from(["line 1", "zz", "("]))
            query = RecallQuery(target, first, last, pattern)
            queries[call_id] = query
            events += [Turn([Call(call_id, RECALL_TOOL)]), Result(call_id, query.stub())]
        else:
            call_id = f"call_{turn}"
            size = draw(st.sampled_from([40, 900, 4000]))
            text = "".join(f"line {n} of {call_id}\n" for n in range(size // 20))
            texts[call_id] = text
            events += [Turn([Call(call_id)]), Result(call_id, text)]
        requests.append(list(events))
    return requests, queries, texts


policies = st.builds(
    MaskPolicy,
    refetch_guard=st.booleans(),
    window_turns=st.integers(1, 3),
    price_model=st.sampled_from(["none", "anthropic"]),
    min_free_percent=st.sampled_from([0, 80]),
    allowance_percent=st.sampled_from([0, 2]),
)


def expected_text(query: RecallQuery, texts: dict[str, str]) -> str | None:
    """What a recall result must carry while it is whole (None: a note)."""
    original = texts.get(query.recall_id)
    return None if original is None else query.select(original)


@settings(max_examples=60, deadline=None)
@given(sessions(), policies, st.sampled_from(FORMATS))
def test_any_recall_sequence_keeps_masking_monotone_and_the_rules_of_masking(
        session, policy, fmt):
    requests, queries, texts = session
    seen: dict[str, object] = {}  # call id -> its outgoing value in the last request
    changed: set[str] = set()
    for events in requests:
        sent = convert(fmt, events)
        body = json.dumps({"model": "m", fmt.list_member: sent}).encode()
        outcome = mask_request_body(body, policy, fmt, recall=True)
        assert isinstance(outcome, Masked | Unchanged)
        out = sent if outcome.body is None else loads(outcome.body.decode())[fmt.list_member]
        assert isinstance(out, list)
        # The rules of masking: only result values differ from what the client sent.
        assert skeleton(fmt, out) == skeleton(fmt, sent)
        for call_id, value in result_values(fmt, out):
            assert isinstance(call_id, str)
            text = text_of(value)
            masked = text is not None and text.startswith("[Observation masquée")
            if call_id in queries and not masked:
                wanted = expected_text(queries[call_id], texts)
                if wanted is None:
                    assert text is not None and "no longer in this conversation" in text
                else:
                    assert text == wanted
            if call_id in seen and seen[call_id] != value:
                # A value changes once, from whole to masked, and stays.
                assert call_id not in changed and masked, (call_id, value)
                changed.add(call_id)
            seen[call_id] = value
