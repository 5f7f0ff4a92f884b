"""What the content view says of re-fetches (``conversation/view/explain.py``,
``explain_refetches.py``), in all three wire formats: the calls of the
newest answer the flow recorded as re-fetches, each with the earlier call
it repeats and what they cost; the kept reason "refetched" explained like
every other; a record that holds wrong values is read as far as it goes."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.planning.judgements import KeptReason
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import CHAT, WireFormat
from obsmask_core.conversation.view.explain import (
    MaskingExplanation,
    NotExplained,
    explain_masking,
)
from obsmask_core.conversation.view.explain_refetches import RefetchedCall
from obsmask_core.conversation.view.masking_page import (
    REASON_MEANINGS,
    MaskingRecord,
    masking_page,
)
from obsmask_core.shared.refetch_facts import RefetchFacts
from obsmask_core.shared.view_text import page_text
from support.formats import (
    FORMAT_IDS,
    FORMATS,
    LONG_OUTPUT,
    Call,
    Event,
    Result,
    Say,
    Turn,
    convert,
)

all_formats = pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
GUARDED = MaskPolicy(window_turns=1, refetch_guard=True)
UNGUARDED = MaskPolicy(window_turns=1, refetch_guard=False)


def read(call_id: str, path: str) -> list[Event]:
    return [Turn([Call(call_id, "read_file", {"path": path})]),
            Result(call_id, f"{LONG_OUTPUT}\n({path}, {call_id})")]


def session(*steps: list[Event]) -> list[Event]:
    events: list[Event] = [Say("user", "Fix the bug.")]
    for step in steps:
        events.extend(step)
    return events


# r4 reads a.py again once a window of one tool turn has masked r1's read.
REREAD = session(read("r1", "a.py"), read("r2", "b.py"), read("r3", "c.py"),
                 read("r4", "a.py"))


def masked(fmt: WireFormat, events: list[Event], policy: MaskPolicy) -> tuple[bytes, Masked]:
    original = json.dumps({"model": "m", fmt.list_member: convert(fmt, events)}).encode()
    outcome = mask_request_body(original, policy, fmt)
    assert isinstance(outcome, Masked), outcome.reason
    return original, outcome


def as_recorded(fmt: WireFormat, outcome: Masked) -> MaskingRecord:
    """The record the flow keeps, with the plan's re-fetches as the summary writes them."""
    metadata: dict[str, object] = {"format": fmt.name}
    if outcome.plan.refetches:
        metadata["refetches"] = outcome.plan.refetches.as_metadata()
    return MaskingRecord.of(metadata)


def page_of(fmt: WireFormat, events: list[Event], policy: MaskPolicy
            ) -> tuple[MaskingExplanation, str]:
    original, outcome = masked(fmt, events, policy)
    record = as_recorded(fmt, outcome)
    explanation = explain_masking(original, outcome.body, fmt, policy,
                                  refetch_calls=record.refetches.new_calls
                                  if record.refetches else ())
    assert isinstance(explanation, MaskingExplanation), explanation
    return explanation, page_text(masking_page(explanation, record, original.decode(),
                                               outcome.body.decode()))


def test_every_kept_reason_has_a_meaning_on_the_page():
    """A reason without one would be left out of the page's kept list."""
    assert set(REASON_MEANINGS) == set(get_args(KeptReason))


@all_formats
def test_the_page_names_each_refetch_the_call_it_repeats_and_what_it_cost(fmt):
    explanation, page = page_of(fmt, REREAD, UNGUARDED)
    assert explanation.refetches == (RefetchedCall("r4", "read_file", "r1", 0),)
    lines = page.splitlines()
    assert ("Re-fetches new in this request (1): calls the model made again after masking "
            "took their earlier result:") in lines
    assert "  r4  read_file  repeats r1 (tool turn 1)" in lines
    assert any(line.startswith("  their results: ") and line.endswith(
        "tokens (estimated); the answer made nothing else: an extra model turn")
        for line in lines)
    assert ("  in the conversation so far: 1 re-fetch(es); results the guard keeps here "
            "(refetched): 0") in lines


@all_formats
def test_a_result_the_guard_keeps_is_listed_under_refetched_with_its_meaning(fmt):
    later = [*REREAD, *read("r5", "d.py")]
    explanation, page = page_of(fmt, later, GUARDED)
    kept = {r.call_id: r.kept for r in explanation.unchanged}
    assert kept["r4"] == "refetched"
    assert f"  refetched (1): {REASON_MEANINGS['refetched']}" in page.splitlines()
    # No re-fetch is new in this request; the conversation's count and the
    # guard's still show.
    assert "Re-fetches new in this request (0)" in page
    assert ("  in the conversation so far: 1 re-fetch(es); results the guard keeps here "
            "(refetched): 1") in page.splitlines()


def test_a_request_without_refetches_has_no_refetch_part():
    _, page = page_of(CHAT, session(read("r1", "a.py"), read("r2", "b.py"),
                                    read("r3", "c.py")), UNGUARDED)
    assert "Re-fetch" not in page and "re-fetch" not in page


def test_clients_that_reuse_call_ids_have_the_earlier_call_found_by_its_turn():
    events = session(read("call_0", "a.py"), read("call_0", "b.py"), read("call_0", "c.py"),
                     read("call_0", "a.py"))
    explanation, page = page_of(CHAT, events, UNGUARDED)
    assert explanation.refetches == (RefetchedCall("call_0", "read_file", "call_0", 0),)
    assert "  call_0  read_file  repeats call_0 (tool turn 1)" in page.splitlines()


def test_a_recorded_call_the_request_does_not_hold_is_listed_as_not_found():
    original, outcome = masked(CHAT, REREAD, UNGUARDED)
    explanation = explain_masking(original, outcome.body, CHAT, UNGUARDED,
                                  refetch_calls=("r4", "zz"))
    assert isinstance(explanation, MaskingExplanation)
    assert explanation.refetches[1] == RefetchedCall("zz", None)
    record = MaskingRecord(format="chat", refetches=RefetchFacts(new=2, new_calls=("r4", "zz")))
    page = page_text(masking_page(explanation, record, original.decode(),
                                  outcome.body.decode()))
    assert ("  zz  (tool not found)  repeats an earlier call (not found in the request)"
            in page.splitlines())


def test_without_the_original_the_recorded_call_ids_are_listed_alone():
    _, outcome = masked(CHAT, REREAD, UNGUARDED)
    record = as_recorded(CHAT, outcome)
    page = page_text(masking_page(NotExplained("the flow holds no original request"), record,
                                  None, outcome.body.decode()))
    assert "  r4  (tool not found)  repeats an earlier call (not found in the request)" in page


@pytest.mark.parametrize("value", ["r4", ["r4"], 3, {"new": "1", "new_calls": "r4"}])
def test_a_wrong_refetch_record_is_read_as_far_as_it_goes_and_the_page_is_made(value):
    original, outcome = masked(CHAT, REREAD, UNGUARDED)
    record = MaskingRecord.of({"format": "chat", "refetches": value})
    assert not record.refetches
    calls = record.refetches.new_calls if record.refetches else ()
    explanation = explain_masking(original, outcome.body, CHAT, UNGUARDED, refetch_calls=calls)
    page = page_text(masking_page(explanation, record, original.decode(),
                                  outcome.body.decode()))
    assert "Re-fetches new" not in page
