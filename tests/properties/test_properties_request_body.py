"""The quick reader (orjson, values found by their bytes) and the exact
reader (the json module, positions recorded while parsing) must agree: the
same body gives the same outcome and the same bytes, whatever encoder the
client used, and however often the same text recurs in the conversation."""

from __future__ import annotations

import json

import orjson
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.body import quick_body
from obsmask_core.conversation.body.quick_body import QuickBody
from obsmask_core.conversation.body.request_body import ExactBody, Replacement
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_read_body, mask_request_body
from obsmask_core.conversation.reuse.grown_body import GrownBody
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES
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


# A body grown from a kept one, read from the kept document ----------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(["role", "content", "messages", ""]), children,
                      max_size=3),
    max_leaves=12)
# Bytes that could turn a read: brackets, commas, quotes, member names.
PIECES = st.sampled_from([b",", b"]", b"[", b"{", b"}", b'"', b":", b" ", b"1", b'"messages"',
                          b'"x"', b"null", b"\\"])


GROWN_CASES = {
    "old_items": st.lists(JSON_VALUES, min_size=1, max_size=4),
    "added_items": st.lists(JSON_VALUES, max_size=4),
    "layout": st.sampled_from(["list_last", "list_first"]),
    "noise": st.lists(PIECES, max_size=6), "where": st.integers(0, 6), "spaced": st.booleans(),
}


def grown_body(old_items: list[object], added_items: list[object], layout: str,
               noise: list[bytes], where: int, spaced: bool) -> tuple[bytes, bytes, int, int]:
    """A kept body, the new body (bytes inserted where the kept list
    closes: items, with noise among them), where the kept list closes
    (proven by its read) and where the inserted bytes end."""
    def write(items: list[object]) -> bytes:
        members = {"model": "m", "messages": items} if layout == "list_last" \
            else {"messages": items, "model": "m"}
        return json.dumps(members, indent=1 if spaced else None).encode()

    old = write(old_items)
    # The list closes at the last "]" before the object's "}", or before
    # the last "model" (the member after it; a generated text may hold one).
    end = old.rindex(b"]", 0, old.rindex(b"}")) if layout == "list_last" \
        else old.rindex(b'"model"')
    while old[end:end + 1] != b"]":
        end -= 1
    assert quick_body.loads_marking_end(old, "messages", end)[1]
    inserted = b"".join(b"," + json.dumps(item).encode() for item in added_items)
    inserted = inserted[:where] + b"".join(noise) + inserted[where:]
    return old, old[:end] + inserted + old[end:], end, end + len(inserted)


@settings(max_examples=300, deadline=None)
@given(**GROWN_CASES)
def test_a_grown_read_is_the_whole_read_or_nothing(old_items, added_items, layout, noise,
                                                  where, spaced):
    """Whatever bytes are inserted where a kept body's list closes, the
    read from the kept document either gives exactly what orjson makes of
    the whole new body (with its list closing after the inserted bytes)
    or gives up."""
    old, new, end, inserted_end = grown_body(old_items, added_items, layout, noise, where,
                                             spaced)
    document = orjson.loads(old)
    inserted = new[end:inserted_end]
    read = QuickBody.grown(new, "messages", document, end, end + len(inserted))
    event("read from the kept document" if read is not None else "left to the whole read")
    if read is None:
        return
    # Written out: the same values, types and order of members.
    assert orjson.dumps(read.members) == orjson.dumps(orjson.loads(new))
    assert quick_body.loads_marking_end(new, "messages", end + len(inserted))[1]


@settings(max_examples=300, deadline=None)
@given(**GROWN_CASES)
def test_a_body_grown_from_a_kept_request_reads_as_the_whole_body_or_not_at_all(
        old_items, added_items, layout, noise, where, spaced):
    """Whatever bytes are inserted where a kept request's list closes, a
    grown body either gives up, or gives the whole body's added items
    without reading the body whole, and when read whole it is what orjson
    makes of it, its list as long as the kept items and the added ones."""
    _, new, end, inserted_end = grown_body(old_items, added_items, layout, noise, where, spaced)
    read = GrownBody.read(new, "messages", len(old_items), end, inserted_end)
    event("read as grown" if read is not None else "left to the whole read")
    if read is None:
        return
    whole = orjson.loads(new)
    kept = len(old_items)
    assert len(read.items) == len(whole["messages"])
    assert orjson.dumps(read.items[kept:]) == orjson.dumps(whole["messages"][kept:])
    assert read.document is None  # the added items alone were read
    assert orjson.dumps(read.members) == orjson.dumps(whole)
    assert orjson.dumps(list(read.items)) == orjson.dumps(whole["messages"])
    assert quick_body.loads_marking_end(new, "messages", inserted_end)[1]
