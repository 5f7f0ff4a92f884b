"""Sessions replayed in worker processes, one session per task.

The replay is CPU-bound (the masking reads every candidate result of every
request) and sessions are independent, so they run side by side. Workers
are forked: they inherit the sessions, the policies and the loaded encoder,
and only the figures travel back. Where fork is not available, or with one
job, everything runs in this process. Results come back in session order,
so the output does not depend on the number of jobs.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import TypeVar, cast

from benchlib.cache.family_figures import FamilySessionFigures, family_session_figures
from benchlib.cache.figures import SessionFigures, session_figures
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.offline.cache.block_tokens import MessageTokens
from obsmask_core.offline.cache.families import FAMILIES, Family
from obsmask_core.offline.cache.sessions import Session
from obsmask_core.shared.message_tokens import message_strings

Figures = TypeVar("Figures")
# What the forked workers read; set only while a pool runs.
_WORK: tuple[list[Session], Callable[[Session], object]] | None = None


def _figures_of(index: int) -> object:
    assert _WORK is not None
    sessions, figures_of = _WORK
    return figures_of(sessions[index])


def _weight(session: Session) -> int:
    """Roughly the work of a replay: its characters times its requests."""
    chars = sum(len(text) for item in session.messages for text in message_strings(item))
    return chars * len(session.request_ends)


def _all(sessions: list[Session], figures_of: Callable[[Session], Figures],
         jobs: int) -> list[Figures]:
    """``figures_of`` every session, in order, with up to ``jobs`` processes."""
    global _WORK
    if jobs <= 1 or len(sessions) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [figures_of(session) for session in sessions]
    # The heaviest first, so that none starts last and keeps the others waiting.
    order = sorted(range(len(sessions)), key=lambda i: -_weight(sessions[i]))
    _WORK = (sessions, figures_of)
    try:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            found = dict(zip(order, pool.map(_figures_of, order), strict=True))
    finally:
        _WORK = None
    return [cast(Figures, found[index]) for index in range(len(sessions))]


def all_figures(sessions: list[Session], policies: dict[str, MaskPolicy],
                tokens: MessageTokens, jobs: int) -> list[SessionFigures]:
    """``session_figures`` of every session (per price model), in order,
    with up to ``jobs`` processes."""
    return _all(sessions, partial(session_figures, policies=policies, tokens=tokens), jobs)


PoliciesOf = Callable[[Session], dict[str, MaskPolicy]]


def _family_figures(session: Session, policies_of: PoliciesOf, tokens: MessageTokens,
                    families: Sequence[Family]) -> FamilySessionFigures:
    return family_session_figures(session, policies_of(session), tokens, families)


def all_family_figures(sessions: list[Session], policies: dict[str, MaskPolicy],
                       tokens: MessageTokens, jobs: int,
                       families: Sequence[Family] = FAMILIES,
                       policies_of: PoliciesOf | None = None) -> list[FamilySessionFigures]:
    """``family_session_figures`` of every session (per model family and
    reading), in order, with up to ``jobs`` processes; each session under
    ``policies``, or under ``policies_of(session)`` when given (sessions
    that compare other policies share the pool, so that none waits)."""
    if policies_of is None:
        return _all(sessions, partial(family_session_figures, policies=policies,
                                      tokens=tokens, families=families), jobs)
    return _all(sessions, partial(_family_figures, policies_of=policies_of, tokens=tokens,
                                  families=families), jobs)
