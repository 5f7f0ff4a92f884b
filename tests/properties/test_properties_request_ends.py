"""A replay resumed at a request end walks only the request ends after it:
``request_ends_after`` must list exactly those of ``request_ends`` past the
point it resumes from, for any answers' starts (in the order the index adds
them), any list length and any point up to the list's end, the end itself
included (the same request planned again replays none)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.conversation.turns.turn_model import ToolTurnIndex


@given(st.lists(st.integers(0, 60), unique=True).map(sorted), st.integers(0, 60), st.data())
def test_the_ends_after_a_point_are_those_of_all_the_ends_past_it(starts, items, data):
    index = ToolTurnIndex(answer_starts=starts)
    after = data.draw(st.integers(0, items))
    assert index.request_ends_after(after, items) == [
        end for end in index.request_ends(items) if end > after]
