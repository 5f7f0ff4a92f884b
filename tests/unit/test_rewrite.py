"""Masking whole request bodies (``conversation/masking/rewrite.py``): the real
sessions in fixtures/sessions/, the same conversations in the three wire
formats, are masked with the same decisions and nothing else changes; and a
body built by the test helpers is masked."""

from __future__ import annotations

import json

import pytest

from obsmask_core.conversation.body.request_text import loads
from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES
from support.chat import body as chat_body_bytes
from support.formats import changed_results, skeleton
from support.processes import REPO

SESSIONS = REPO / "fixtures" / "sessions"
NAMES = sorted(path.name for path in (SESSIONS / "chat").glob("*.json"))


def test_every_session_has_its_twins():
    assert len(NAMES) == 10
    for fmt in ("anthropic", "responses"):
        assert sorted(p.name for p in (SESSIONS / fmt).glob("*.json")) == NAMES


@pytest.mark.parametrize("window", [1, 8])
@pytest.mark.parametrize("name", NAMES)
def test_twins_are_masked_alike(name, window):
    """Each session, masked as a whole request body in each format: the same
    results are masked, with the same placeholders, and nothing else changes."""
    policy = MaskPolicy(window_turns=window)
    seen = {}
    for fmt in (CHAT, ANTHROPIC, RESPONSES):
        body = (SESSIONS / fmt.name / name).read_bytes()
        outcome = mask_request_body(body, policy, fmt)
        assert outcome.body is not None and outcome.plan is not None, outcome.reason
        before = json.loads(body)[fmt.list_member]
        after = loads(outcome.body.decode())[fmt.list_member]
        assert after == mask_items(before, policy, fmt)
        assert skeleton(fmt, after) == skeleton(fmt, before)
        seen[fmt.name] = (
            [(d.call_id, d.new_text) for d in outcome.plan.decisions],
            changed_results(fmt, before, after),
            outcome.tool_chars_before,
            outcome.tool_chars_after,
        )
    assert seen["chat"] == seen["anthropic"] == seen["responses"]
    assert seen["chat"][0], "every real session has old results to mask"


def test_a_body_from_the_builders_is_masked():
    """Sanity check of the helper used elsewhere: a built body is masked."""
    from support.chat import conversation

    outcome = mask_request_body(chat_body_bytes(conversation(4)), MaskPolicy(window_turns=1))
    assert outcome.body is not None and outcome.plan is not None and outcome.plan.masked == 3
