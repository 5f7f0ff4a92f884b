"""The rewrite's quick reader gives way to the exact one, never an exception:
orjson reads nesting deeper than Python 3.11 can compare, and such a body is
refused with the exact reader's reason (Python 3.12 compares it, and masks)."""

from __future__ import annotations

import json

from obsmask_core.conversation.masking.outcomes import Masked, Unreadable
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import CHAT


def test_a_body_nested_past_what_python_compares_is_masked_or_unreadable_never_raises():
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "old output " * 50},
        {"role": "assistant", "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "new output " * 50},
    ]
    deep = "[" * 1000 + "]" * 1000
    body = json.dumps({"model": "m", "messages": messages})[:-1] + f', "x": {deep}}}'
    outcome = mask_request_body(body.encode(), MaskPolicy(window_turns=1, min_chars=1), CHAT)
    assert isinstance(outcome, Masked | Unreadable)
    if isinstance(outcome, Unreadable):
        assert "nested too deeply" in outcome.reason
    else:
        assert json.loads(outcome.body)["x"] == json.loads(deep)
