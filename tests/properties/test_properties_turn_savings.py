"""What masking each tool turn would free is counted two ways: all at once
for a request (``TurnSavings.of``, every request) and again for the turns
whose results the re-fetch guard keeps (``recount``, which first sets
those turns back to nothing). Counting every turn again must give the
savings counted at once, for any results and any placeholders, so that a
replay reads the same figures either way."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.conversation.frontier.turn_savings import TurnSavings
from obsmask_core.conversation.turns.turn_model import ToolResult, ToolTurn, ToolTurnIndex


@st.composite
def requests(draw):
    turns = draw(st.integers(1, 5))
    results = []
    for number in range(draw(st.integers(0, 12))):
        turn = draw(st.integers(0, turns - 1))
        position = draw(st.integers(turn * 10 + 1, turn * 10 + 9))
        results.append(ToolResult((position,), f"call_{number}", turn, "Bash", None,
                                  draw(st.text(max_size=40))))
    index = ToolTurnIndex(turns=[ToolTurn((turn * 10,), ()) for turn in range(turns)],
                          results=results)
    maskable = {number: draw(st.text(max_size=10))
                for number in range(len(results)) if draw(st.booleans())}
    return index, maskable


@given(requests())
def test_the_savings_counted_again_for_every_turn_are_those_counted_at_once(request):
    index, maskable = request
    at_once = TurnSavings.of(index, maskable)
    again = TurnSavings.of(index, maskable)
    again.recount(set(range(len(index.turns))), index, maskable)
    assert again == at_once
