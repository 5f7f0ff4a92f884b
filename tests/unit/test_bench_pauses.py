"""The pause families' gaps (``scripts/benchlib/cache/pauses.py``): drawn
from the stated distribution, from seeds that give the same gaps every run,
and the share of the saving that comes from cold turns
(``scripts/benchlib/cache/pause_report.py``)."""

from __future__ import annotations

import itertools
import random

import pytest

from benchlib.cache.pause_report import cold_turn_share
from benchlib.cache.pauses import (
    LONG_GAPS,
    PACED_SECONDS,
    PAUSE_FAMILIES,
    draw_gaps,
    long_gaps,
    pause_seed,
    pause_sessions,
    pause_times,
)
from obsmask_core.offline.cache.sessions import Session

DRAWS = 40_000
SHORT_LONG, HOUR_PLUS = LONG_GAPS


def _long(gaps: list[float]) -> list[float]:
    return [gap for gap in gaps if gap > PACED_SECONDS[1]]


@pytest.mark.parametrize("family", PAUSE_FAMILIES, ids=lambda family: family.name)
def test_the_share_of_long_gaps_is_the_family_s_stated_probability(family):
    gaps = draw_gaps(random.Random(7), DRAWS, family.long_share)
    share = len(_long(gaps)) / DRAWS
    # Four standard deviations of a binomial share: fails by chance once in
    # about 16,000 seeds, and this seed is fixed.
    tolerance = 4 * (family.long_share * (1 - family.long_share) / DRAWS) ** 0.5
    assert abs(share - family.long_share) < tolerance


def test_one_long_gap_in_four_is_over_an_hour_and_three_within_55_minutes():
    long = _long(draw_gaps(random.Random(11), DRAWS, 1.0))
    assert len(long) == DRAWS
    hour_plus = sum(1 for gap in long if gap > 3600) / DRAWS
    assert HOUR_PLUS[0] == 0.25 and SHORT_LONG[0] == 0.75
    assert abs(hour_plus - 0.25) < 4 * (0.25 * 0.75 / DRAWS) ** 0.5


def test_every_gap_falls_in_the_paced_range_or_in_a_long_range():
    for gap in draw_gaps(random.Random(3), DRAWS, 0.27):
        assert (PACED_SECONDS[0] <= gap <= PACED_SECONDS[1]
                or 6 * 60 <= gap <= 55 * 60 or 61 * 60 <= gap <= 180 * 60), gap


def test_long_gaps_stay_clear_of_both_lifetimes_and_their_margins():
    """Over Anthropic's 300 s and the 60 s margin, and never between
    OpenAI's 3,600 s and that margin: the caches and obsmask agree on
    which turns are cold."""
    for gap in _long(draw_gaps(random.Random(5), DRAWS, 1.0)):
        assert gap >= 360
        assert not 3300 < gap < 3660


def test_the_same_seed_draws_the_same_gaps():
    family = PAUSE_FAMILIES[0]
    assert pause_times(family, "chat/one", 50) == pause_times(family, "chat/one", 50)
    assert pause_seed(family.name, "chat/one") == pause_seed(family.name, "chat/one")


def test_a_seed_depends_on_the_family_and_the_session_not_on_python_s_hash():
    first, second = PAUSE_FAMILIES
    seeds = {pause_seed(first.name, "chat/one"), pause_seed(first.name, "chat/two"),
             pause_seed(second.name, "chat/one")}
    assert len(seeds) == 3
    # zlib.crc32 of "pauses-27pct/chat/one", whatever PYTHONHASHSEED is.
    assert pause_seed(first.name, "chat/one") == 3001 + 1756450010


def test_times_start_at_zero_and_grow_by_the_gaps():
    times = pause_times(PAUSE_FAMILIES[0], "anthropic/a", 30)
    assert len(times) == 30 and times[0] == 0.0
    assert all(after > before for before, after in itertools.pairwise(times))
    assert pause_times(PAUSE_FAMILIES[0], "anthropic/a", 1) == [0.0]


def test_the_real_and_claude_code_sessions_get_a_copy_in_every_family_and_others_none():
    messages: list[object] = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "a", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
    ]
    sessions = [Session("chat/one", "real", list(messages)),
                Session("claude_code/one", "claude_code", list(messages)),
                Session("synthetic-1", "synthetic", list(messages))]
    copies = pause_sessions(sessions)
    assert [copy.name for copy in copies] == [
        f"{family.name}/{name}" for family in PAUSE_FAMILIES
        for name in ("chat/one", "claude_code/one")]
    for copy in copies:
        assert copy.kind in {family.name for family in PAUSE_FAMILIES}
        assert len(copy.times) == len(copy.request_ends)
    assert sessions[0].times == [0.0, 20.0]  # the original keeps its pace


def test_long_gaps_counts_the_gaps_past_an_agent_s_pace():
    assert long_gaps([0.0, 20.0, 500.0, 520.0, 4000.0]) == 2


def test_the_share_of_saving_from_cold_turns_is_their_part_of_masking_s_saving():
    # no masking 100, masking without cold turns 90, with them 80: cold
    # turns bring 10 of the 20 saved.
    assert cold_turn_share(80.0, 90.0, 100.0) == pytest.approx(0.5)
    # without cold turns masking costs more than none: above 1
    assert cold_turn_share(95.0, 105.0, 100.0) == pytest.approx(2.0)
    # masking with cold turns saves nothing: no share
    assert cold_turn_share(100.0, 110.0, 100.0) is None
