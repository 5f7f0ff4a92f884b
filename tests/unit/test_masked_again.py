"""A grown request's masked body made from the kept one's (``masked_again``):
whatever edits the kept plan and the new one make, the body made again is
byte for byte the one a splice of every edit into the grown body gives, its
list ends where that one's does, and it keeps the edits it was made with."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.body.request_body import Edit, Replacement
from obsmask_core.conversation.reuse.masked_again import masked_again, placed_in_order
from obsmask_core.conversation.reuse.proven_spans import constructed
from obsmask_core.conversation.reuse.records import PreviousRequest, SignatureEntry
from support.grown_bodies import KEPT, chat_turn, grown, proven_chat


def _results(outputs: list[str]) -> list[object]:
    return [item for number, output in enumerate(outputs)
            for item in chat_turn(f"call_{number}", output)]


def _edit(number: int, outputs: list[str]) -> tuple[SignatureEntry, Edit]:
    """Result ``number`` masked: its signature entry and its edit."""
    index, text = len(KEPT) + 2 * number + 1, f"[masked {number}]"
    return ((index,), text, "masked"), Replacement(index, ("content",), outputs[number], text)


def _kept(outputs: list[str], masked: list[int]) -> tuple[PreviousRequest, int]:
    """The request of the first ``outputs`` with ``masked`` masked, as the
    masker keeps it; and where its list closes."""
    body, _, end = grown(_results(outputs))
    _, proven = proven_chat(_results(outputs))
    pairs = [_edit(number, outputs) for number in masked]
    made = constructed(body, [edit for _, edit in pairs], proven, end)
    assert made is not None
    signature = tuple(entry for entry, _ in pairs)
    return PreviousRequest(
        fmt="chat", recall=False, body=body, end=end, items=len(KEPT) + 2 * len(outputs),
        written=b"", signature=signature, masked=made.body, masked_end=end + made.grew,
        placed=placed_in_order(signature, made.placed)), end


@settings(max_examples=150, deadline=None)
@given(outputs=st.lists(st.text(min_size=1, max_size=12), min_size=2, max_size=7),
       kept_count=st.integers(1, 6), data=st.data())
def test_the_body_made_again_is_the_splice_of_every_edit(outputs, kept_count, data):
    kept_count = min(kept_count, len(outputs) - 1)
    numbers = st.lists(st.integers(0, len(outputs) - 1), unique=True).map(sorted)
    before = [n for n in data.draw(numbers) if n < kept_count]
    now = data.draw(numbers)
    previous, start = _kept(outputs[:kept_count], before)
    body, _, end = grown(_results(outputs))
    _, proven = proven_chat(_results(outputs))
    pairs = [_edit(number, outputs) for number in now]
    signature = tuple(entry for entry, _ in pairs)
    whole = constructed(body, [edit for _, edit in pairs], proven, end)
    again = masked_again(previous, body, start, signature,
                         lambda positions: [pairs[at][1] for at in positions], proven, end)
    assert whole is not None and again is not None
    assert again.body == whole.body
    assert again.end == end + whole.grew
    assert again.placed == placed_in_order(signature, whole.placed)


def test_a_kept_body_whose_edits_are_not_known_is_not_made_again():
    outputs = ["one", "two", "three"]
    previous, start = _kept(outputs[:2], [0])
    body, _, end = grown(_results(outputs))
    _, proven = proven_chat(_results(outputs))
    unknown = PreviousRequest(**{**{name: getattr(previous, name) for name in
                                    PreviousRequest.__dataclass_fields__}, "placed": None})
    entry, edit = _edit(1, outputs)
    assert masked_again(unknown, body, start, (entry,), lambda _: [edit], proven, end) is None
    again = masked_again(previous, body, start, (entry,), lambda _: [edit], proven, end)
    assert again is not None and b"[masked 1]" in again.body and b"[masked 0]" not in again.body
