"""Where a request's written items first name a ``cache_control`` member is
searched as the conversation grows: from a checkpoint of its first items,
``marks_from`` must find what a search of the whole writing finds, for any
writing, any checkpoint that is a prefix of it (with its own finding, or
none when its replay did not look) and the writing's closing bracket there
or not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.conversation.billing.unmarked import CACHE_CONTROL_WRITTEN
from obsmask_core.conversation.frontier.replay_checkpoint import Checkpoint, marks_from

# Pieces that build a name across a cut, or nearly.
PIECES = st.sampled_from([b'"cache_', b'control"', CACHE_CONTROL_WRITTEN, b'"cache_control',
                          b"x", b",", b'{"a":1}', b'"'])


def checkpoint(items_json: bytes, looked: bool) -> Checkpoint:
    """A checkpoint of these items, whose replay searched them or not (-1)."""
    return Checkpoint(
        items=1, items_json=items_json, judged_turns=0, chars_before=(), freed=(),
        counted=(), first=(), turn=0, request_end=0, counted_before_frontier=0,
        covered=0, pending=0, pending_first=None, masked_turns=(), ledger=None,
        marks_from=marks_from(items_json, len(items_json), None) if looked else -1)


def whole_search(written: bytes, items_end: int) -> int:
    found = written.find(CACHE_CONTROL_WRITTEN, 0, items_end)
    return found if found >= 0 else items_end


@given(st.lists(PIECES, max_size=12).map(b"".join), st.data(), st.booleans())
def test_a_search_resumed_from_a_prefix_finds_what_a_whole_search_finds(items, data, closed):
    written = items + b"]" if closed else items
    cut = data.draw(st.integers(0, len(items)))
    resume = checkpoint(items[:cut], data.draw(st.booleans())) \
        if data.draw(st.booleans()) else None
    assert marks_from(written, len(items), resume) == whole_search(written, len(items))
