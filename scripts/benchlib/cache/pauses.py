"""The pause families: copies of the real sessions (every wire format) and
of their Claude Code-shaped Anthropic copies, whose requests are no longer
``PACE_SECONDS`` apart but separated by gaps drawn from a stated
distribution, replayed with that virtual clock: the masker visits its
table of when conversations were last seen at each request's time (cold
turns, ``cold_turns``), and the replay's caches expire entries by it.

The distribution (``PAUSE_DISTRIBUTION`` says the same in the JSON output):

- each gap between two requests is long with probability ``p``, else an
  agent's pace, uniform in ``PACED_SECONDS`` (5-60 s);
- two families: "pauses-27pct", p = 0.27: Claude Code users report that
  27% of their replies come after the 5-minute cache lifetime
  (anthropics/claude-code#74075); "pauses-3pct", p = 0.034: a hosted
  cache-safe masking service (context-guru) measured cold (TTL-expired)
  turns as 3.4% of requests. Both figures as the issue "cold turns" cites
  them;
- a long gap is uniform in 6-55 minutes with probability 3/4, in 61-180
  minutes with probability 1/4. That hour-plus share is our assumption (no
  source measures it); it decides which long gaps also outlive OpenAI's
  1-hour cache and Anthropic's 1-hour entries. Both ranges stay clear of a
  lifetime and its 60 s margin (Anthropic: 300 s, cold for obsmask after
  360 s; OpenAI: 3,600 s, after 3,660 s), so the replay's caches and
  obsmask agree on which turns are cold;
- every gap is drawn the same way, the one before the 2nd request too;
- session s of family f draws its gaps from ``random.Random(PAUSE_SEED +
  crc32("f/s"))``: the same gaps in every run, whichever other sessions the
  run has (--quick, --families, --formats).

A copy is named ``<family>/<session>`` (``pauses-27pct/anthropic/...``,
``pauses-3pct/claude_code/...``) and its kind is its family's name.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from obsmask_core.offline.cache.sessions import PACE_SECONDS, Session

PAUSE_SEED = 3001
MINUTE = 60.0
# An agent's pace between two requests: the model's answer and the tool's run.
PACED_SECONDS = (5.0, 60.0)
# The long gaps: (share of the long gaps, lowest and highest seconds).
LONG_GAPS: tuple[tuple[float, float, float], ...] = (
    (0.75, 6 * MINUTE, 55 * MINUTE),
    (0.25, 61 * MINUTE, 180 * MINUTE),
)
# What the copies are made of: the kinds of session that get them.
PAUSED_KINDS = ("real", "claude_code")


@dataclass(frozen=True)
class PauseFamily:
    name: str
    long_share: float  # the probability that a gap is long
    source: str


PAUSE_FAMILIES: tuple[PauseFamily, ...] = (
    PauseFamily("pauses-27pct", 0.27,
                "Claude Code users report that 27% of replies come after the 5-minute "
                "cache lifetime (anthropics/claude-code#74075, as the issue 'cold turns' "
                "cites it)"),
    PauseFamily("pauses-3pct", 0.034,
                "a hosted cache-safe masking service (context-guru) measured cold "
                "(TTL-expired) turns as 3.4% of requests (as the issue 'cold turns' cites "
                "it)"),
)
PAUSE_FAMILY_NAMES = tuple(family.name for family in PAUSE_FAMILIES)

PAUSE_DISTRIBUTION: dict[str, object] = {
    "families": {family.name: {"long_gap_probability": family.long_share,
                               "source": family.source}
                 for family in PAUSE_FAMILIES},
    "sessions": "a copy of every real session of the run (every wire format) and of every "
                "Claude Code-shaped Anthropic copy, per family; named <family>/<session>",
    "paced_gap_seconds": f"uniform in [{PACED_SECONDS[0]:g}, {PACED_SECONDS[1]:g}] s "
                         f"(the other sessions: {PACE_SECONDS:g} s)",
    "long_gap_seconds": {
        f"uniform in [{low:g}, {high:g}] ({low / MINUTE:g}-{high / MINUTE:g} min)": share
        for share, low, high in LONG_GAPS},
    "long_gap_source": "the hour-plus share (1 in 4 long gaps over 61 minutes) is our "
                       "assumption, not a measurement; it decides which long gaps outlive "
                       "OpenAI's 1-hour cache and Anthropic's 1-hour entries",
    "first_gap": "drawn like the others (a long gap before the 2nd request may happen)",
    "seed": f"random.Random(PAUSE_SEED + zlib.crc32('<family>/<session>')) per copy, "
            f"PAUSE_SEED = {PAUSE_SEED}",
    "clock": "each request at the sum of the gaps before it: obsmask's table of when "
             "conversations were last seen is visited at that time, and the replay's "
             "caches expire entries by it",
}


def draw_gap(rng: random.Random, long_share: float) -> float:
    """One gap in seconds: long with probability ``long_share`` (see
    ``LONG_GAPS``), else an agent's pace (``PACED_SECONDS``)."""
    if rng.random() < long_share:
        pick = rng.random()
        for share, low, high in LONG_GAPS:
            if pick < share:
                return rng.uniform(low, high)
            pick -= share
        return rng.uniform(*LONG_GAPS[-1][1:])
    return rng.uniform(*PACED_SECONDS)


def draw_gaps(rng: random.Random, count: int, long_share: float) -> list[float]:
    """``count`` gaps drawn one after the other from ``rng``."""
    return [draw_gap(rng, long_share) for _ in range(count)]


def pause_seed(family: str, session: str) -> int:
    """The seed of ``session``'s copy in ``family``: stable across runs and
    Python processes (no ``hash``), whatever other sessions the run has."""
    return PAUSE_SEED + zlib.crc32(f"{family}/{session}".encode())


def pause_times(family: PauseFamily, session: str, requests: int) -> list[float]:
    """When each of ``requests`` requests is sent, from 0."""
    rng = random.Random(pause_seed(family.name, session))
    times = [0.0]
    for gap in draw_gaps(rng, max(0, requests - 1), family.long_share):
        times.append(times[-1] + gap)
    return times[:requests]


def paused_copy(session: Session, family: PauseFamily) -> Session:
    """``session`` with its requests at ``family``'s gaps (the same
    conversation, shared, not copied: nothing changes it)."""
    return dataclasses.replace(
        session, name=f"{family.name}/{session.name}", kind=family.name,
        times=pause_times(family, session.name, len(session.request_ends)))


def pause_sessions(sessions: Sequence[Session],
                   families: Sequence[PauseFamily] = PAUSE_FAMILIES) -> list[Session]:
    """A copy of each real and Claude Code-shaped session of ``sessions``
    per family, family by family."""
    return [paused_copy(session, family) for family in families
            for session in sessions if session.kind in PAUSED_KINDS]


def long_gaps(times: Sequence[float], over: float = PACED_SECONDS[1]) -> int:
    """The gaps between consecutive ``times`` longer than ``over`` seconds."""
    return sum(1 for before, after in itertools.pairwise(times)
               if after - before > over)
