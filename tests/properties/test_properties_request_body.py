"""The quick reader (orjson, values found by their bytes) and the exact
reader (the json module, positions recorded while parsing) must agree: the
same body gives the same outcome and the same bytes, whatever encoder the
client used, and however often the same text recurs in the conversation."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.outcomes import Masked
from obsmask_core.conversation.policy import MaskPolicy
from obsmask_core.conversation.request_body import ExactBody, QuickBody, Replacement
from obsmask_core.conversation.rewrite import mask_read_body, mask_request_body
from obsmask_core.conversation.wire_formats import ANTHROPIC, CHAT, RESPONSES
from support.encoders import ENCODERS
from support.formats import Call, Event, Result, Say, Turn, convert

# Few texts, so that the same one recurs as a result, an answer and a name.
TEXT = st.sampled_from(["ok", "bash", "call_a", "x" * 300, "caf\u00e9 " * 80,
                        'say "ok"\n' * 40, "\u2028\U0001f600" * 90])


@st.composite
def events(draw: st.DrawFn) -> list[Event]:
    out: list[Event] = [Say("user", draw(TEXT))]
    for number in range(draw(st.integers(1, 6))):
        call_id = draw(st.sampled_from([f"call_{number}", "call_a"]))
        out.append(Turn([Call(call_id, draw(TEXT))]))
        out.append(Result(call_id, draw(TEXT)))
        if draw(st.booleans()):
            out.append(Say("assistant", draw(TEXT)))
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=events(), fmt=st.sampled_from([CHAT, ANTHROPIC, RESPONSES]),
       encoder=st.sampled_from(sorted(ENCODERS)), window=st.integers(0, 3))
def test_the_quick_and_the_exact_reader_give_the_same_bytes(conversation, fmt, encoder,
                                                             window):
    policy = MaskPolicy(window_turns=window, min_chars=1)
    body = ENCODERS[encoder]({"model": "m", fmt.list_member: convert(fmt, conversation)})
    exact = mask_read_body(ExactBody.read(body, fmt.list_member), policy, fmt)
    outcome = mask_request_body(body, policy, fmt)
    assert type(outcome) is type(exact)
    assert outcome.body == exact.body
    quick = QuickBody.read(body, fmt.list_member)
    assert quick is not None
    tried = mask_read_body(quick, policy, fmt)
    # The quick reader either gives the exact reader's body or gives up
    # (and the rewrite then uses the exact one): never another body.
    if isinstance(tried, Masked):
        assert tried.body == exact.body


@given(new=st.one_of(st.text(), st.lists(st.fixed_dictionaries({"type": st.just("text"),
                                                                 "text": st.text()}))))
def test_a_new_value_is_written_as_json_dumps_writes_it(new):
    """A placeholder (or a list of blocks) goes into the body exactly as
    ``json.dumps(value, ensure_ascii=False)`` writes it, lone surrogates and
    line separators included."""
    replacement = Replacement(0, ("content",), "old", new)
    assert replacement.encoded() == json.dumps(new, ensure_ascii=False)
