"""A cold turn on a real session (``fixtures/sessions/``), each request as its
client sends it (Anthropic ones as Claude Code does: its moving breakpoint,
its two marked system blocks), planned with the shipped ``mitm.toml`` by
the masker the proxy runs, with a table of when conversations were last
seen on a virtual clock.

The rule: a request that comes back after the cache's lifetime is billed
whole, masked or not, so it goes out with every result masked that the
same policy masks without a cache (the frontier at the window, nothing
kept for the cache's sake); the warm requests after it keep those masked.
On a warm cache the same session keeps results for the cache's sake, so
the test can fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmask_core.conversation.billing.last_seen import LastSeen, Visit
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked, RewriteOutcome
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values
from obsmask_core.offline.cache.clients import ClientRequests
from obsmask_core.offline.cache.sessions import Session, load_real_sessions
from obsmask_core.shared.config_file import load_config
from obsmask_core.shared.settings import build

REPO = Path(__file__).resolve().parents[2]
PACE = 20.0  # seconds between requests
# The one long pause: past Anthropic's 5 minutes and the margin; past the
# hour after which OpenAI's cache is gone for certain.
PAUSES = {"anthropic": 400.0, "chat": 3700.0}
COLD_AT = 30  # the request after this many earlier ones comes after the pause


def shipped(**changes: object) -> MaskPolicy:
    values = policy_values(load_config(str(REPO / "mitm.toml")), "")
    return build(MaskPolicy, {**values, **changes})


def longest_session(fmt: str) -> Session:
    sessions = load_real_sessions(REPO / "fixtures" / "sessions", (fmt,))
    return max(sessions, key=lambda s: len(s.request_ends))


def plans(session: Session, policy: MaskPolicy, pause_at: int | None) -> list[MaskPlan]:
    """Each request's plan, sent at the session's pace (and after the pause)."""
    masker, table, client = Masker(policy), LastSeen(), ClientRequests(session)
    now, out = 0.0, []
    for number, end in enumerate(session.request_ends):
        now += PAUSES[session.fmt.name] if number == pause_at else PACE
        outcome: RewriteOutcome = masker.mask(client.request(end).body, session.fmt,
                                              visit=Visit(table, now))
        assert outcome.plan is not None, outcome
        out.append(outcome.plan)
        if number == pause_at:
            assert isinstance(outcome, Masked)
    return out


def masked_ids(plan: MaskPlan) -> set[str]:
    return {d.call_id for d in plan.decisions}


@pytest.mark.parametrize("fmt", ["anthropic", "chat"])
def test_the_request_after_a_long_pause_masks_what_the_policy_masks_without_a_cache(fmt):
    session = longest_session(fmt)
    assert len(session.request_ends) > COLD_AT + 5
    warm = plans(session, shipped(), None)
    cold = plans(session, shipped(), COLD_AT)
    no_cache = plans(session, shipped(price_model="none", min_free_percent=0), None)
    # Premise: on a warm cache, results are kept for the cache's sake.
    assert warm[COLD_AT].kept.get("cache", 0) + warm[COLD_AT].kept.get("pending", 0) > 0
    assert masked_ids(warm[COLD_AT]) < masked_ids(no_cache[COLD_AT])
    # The cold request: billed cold, everything the cacheless policy masks.
    bill = cold[COLD_AT].bill
    assert bill is not None and bill.cold and bill.predicted_read == 0
    assert masked_ids(cold[COLD_AT]) == masked_ids(no_cache[COLD_AT])
    assert cold[COLD_AT].kept.get("cache", 0) == 0
    # The warm requests after it keep what it masked, within the allowance.
    for later in cold[COLD_AT + 1:]:
        assert masked_ids(cold[COLD_AT]) <= masked_ids(later)
        assert later.bill is not None and not later.bill.cold
        assert later.bill.with_masking <= later.bill.without_masking * 1.02 + 1e-6
    # Before the pause nothing changed.
    for number in range(COLD_AT):
        assert masked_ids(cold[number]) == masked_ids(warm[number]), number
