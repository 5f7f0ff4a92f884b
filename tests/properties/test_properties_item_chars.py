"""The frontier measures every item of every request by the characters of
its string values: the fast count must equal the sum over the strings that
``message_strings`` lists, for any JSON value (keys never count, nor what a
``cache_control`` holds: clients move breakpoints from request to
request)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.conversation.billing.breakpoints import prompt_chars
from obsmask_core.shared.message_tokens import message_strings

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=5) | st.just("cache_control"), children, max_size=4),
    max_leaves=30,
)


@given(json_values)
def test_the_fast_count_equals_the_strings_message_strings_lists(value):
    assert prompt_chars(value) == sum(
        len(text) for text in message_strings(value, frozenset({"cache_control"})))
