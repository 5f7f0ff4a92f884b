"""The value search's encoders write what the encoders they stand for
write: a faster way to the same bytes, never other bytes."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.conversation.body.value_search import _ascii_compact_json, _utf8_json

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)


@given(st.text())
def test_the_utf8_encoder_writes_a_string_as_pythons_json_keeping_utf8_does(text):
    assert _utf8_json(text) == json.dumps(text, ensure_ascii=False).encode("utf-8")


@given(JSON_VALUES)
def test_the_utf8_and_compact_encoders_write_any_value_as_json_dumps_does(value):
    assert _utf8_json(value) == json.dumps(value, ensure_ascii=False).encode("utf-8")
    assert _ascii_compact_json(value) == json.dumps(value, separators=(",", ":")).encode("ascii")
