"""Repeated tool outputs and the quick reader (``conversation/body``): agents
repeat outputs (the same warning, the same file read twice). When an
earlier copy stays and a later identical one is masked, the quick reader
must replace the later one, so the request is masked without the exact
reader's second pass (which the check would otherwise force: it refuses a
body whose replaced value is the kept copy)."""

from __future__ import annotations

import json

import pytest

from obsmask_core.conversation.body.quick_body import QuickBody
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.masking.rewrite import mask_read_body, mask_request_body
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from support.formats import Call, Event, Result, Say, Turn, convert

SAME = "WARNING: pip is being invoked by an old script wrapper. " * 40
EVENTS: list[Event] = [
    Say("user", "fix the build"),
    Turn([Call("r1", "read_file")], text="look"), Result("r1", SAME),
    Turn([Call("b2", "bash")], text="run"), Result("b2", SAME),
    Turn([Call("b3", "bash")], text="again"), Result("b3", "ok " * 300),
    Turn([Call("b4", "bash")], text="once more"), Result("b4", "done " * 300),
]
# read_file's result stays (an excluded tool); bash's identical one is masked.
POLICY = MaskPolicy(window_turns=1, exclude_tools=("read_file",))


def body_of(fmt: WireFormat) -> bytes:
    items = convert(fmt, EVENTS)
    members: dict[str, object] = {"model": "m", fmt.list_member: items}
    return json.dumps(members).encode()


@pytest.mark.parametrize("fmt", [CHAT, ANTHROPIC, RESPONSES], ids=lambda f: f.name)
def test_a_result_equal_to_an_earlier_one_that_stays_is_masked_by_the_quick_reader(fmt):
    body = body_of(fmt)
    quick = QuickBody.read(body, fmt.list_member)
    assert quick is not None
    outcome = mask_read_body(quick, POLICY, fmt)
    assert isinstance(outcome, Masked), outcome
    masked = {d.call_id for d in outcome.plan.decisions}
    assert "b2" in masked and "r1" not in masked
    # The kept copy is the client's, byte for byte; the masked one is gone.
    assert body.count(json.dumps(SAME).encode()) == 2
    assert outcome.body.count(json.dumps(SAME).encode()) == 1
    assert outcome.body.index(json.dumps(SAME).encode()) == body.index(json.dumps(SAME).encode())
    # And the whole pipeline (quick, then exact when refused) agrees.
    assert mask_request_body(body, POLICY, fmt) == outcome
