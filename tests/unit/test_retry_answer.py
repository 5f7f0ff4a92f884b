"""A retry (the same bytes as a request the masker kept) gets the answer that
request got, without a plan made again, as long as nothing planning
depends on changed: the same policy, and the same from the table of when
conversations were last seen. When the table says something else now (the
cache expired meanwhile, the provider's brake stopped the conversation),
the retry is planned anew, as a masker that never saw it plans it."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest

from obsmask_core.conversation.billing.history_key import HistoryKey
from obsmask_core.conversation.billing.last_seen import LastSeen, Visit
from obsmask_core.conversation.masking import rewrite
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked, RewriteOutcome, Unchanged
from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values
from obsmask_core.offline.cache.clients import ClientRequests
from obsmask_core.offline.cache.sessions import Session, load_real_sessions
from obsmask_core.shared.config_file import load_config
from obsmask_core.shared.settings import build

REPO = Path(__file__).resolve().parents[2]
PACE = 20.0  # seconds between requests
LONG_PAUSE = 400.0  # past Anthropic's five minutes and the margin
RETRIED = 30  # the request sent twice


def shipped(**changes: object) -> MaskPolicy:
    values = policy_values(load_config(str(REPO / "mitm.toml")), "")
    return build(MaskPolicy, {**values, **changes})


@pytest.fixture(scope="module")
def session() -> Session:
    sessions = load_real_sessions(REPO / "fixtures" / "sessions", ("anthropic",))
    longest = max(sessions, key=lambda s: len(s.request_ends))
    assert len(longest.request_ends) > RETRIED
    return longest


def sent_up_to_the_retried_one(session: Session, masker: Masker,
                               table: LastSeen) -> tuple[bytes, RewriteOutcome, float]:
    """Each request up to the retried one, at the session's pace; that one's
    body, its outcome and when it was sent."""
    client, now = ClientRequests(session), 0.0
    outcome: RewriteOutcome | None = None
    request = b""
    for end in session.request_ends[:RETRIED + 1]:
        now += PACE
        request = client.request(end).body
        outcome = masker.mask(request, session.fmt, visit=Visit(table, now))
    assert isinstance(outcome, Masked)
    return request, outcome, now


def planned_while(action):
    with mock.patch.object(rewrite, "plan_masking", wraps=rewrite.plan_masking) as plan:
        outcome = action()
    return outcome, plan.call_count


def test_a_retry_soon_after_gets_the_kept_answer_without_a_plan_made_again(session):
    masker, table = Masker(shipped()), LastSeen()
    request, first, now = sent_up_to_the_retried_one(session, masker, table)
    again, plans = planned_while(
        lambda: masker.mask(bytes(request), session.fmt, visit=Visit(table, now + 5.0)))
    assert plans == 0
    assert isinstance(again, Masked) and again.body == first.body
    assert again.plan is first.plan


def test_a_retry_after_the_cache_expired_is_planned_anew_as_a_cold_request(session):
    masker, table = Masker(shipped()), LastSeen()
    request, first, now = sent_up_to_the_retried_one(session, masker, table)
    later = now + LONG_PAUSE
    again, plans = planned_while(
        lambda: masker.mask(bytes(request), session.fmt, visit=Visit(table, later)))
    assert plans >= 1
    assert isinstance(again, Masked)
    assert again.plan.bill is not None and again.plan.bill.cold
    # Cold, it masks what the warm request kept for the cache's sake.
    assert {d.call_id for d in again.plan.decisions} > {d.call_id for d in first.plan.decisions}
    # As a masker that never saw the request plans it, given the same table.
    oracle_table = LastSeen()
    oracle_masker = Masker(shipped())
    _, _, when = sent_up_to_the_retried_one(session, oracle_masker, oracle_table)
    fresh = Masker(shipped()).mask(bytes(request), session.fmt,
                                   visit=Visit(oracle_table, when + LONG_PAUSE))
    assert isinstance(fresh, Masked) and again.body == fresh.body


def test_a_retry_after_the_provider_brake_stopped_the_conversation_is_planned_anew(session):
    masker, table = Masker(shipped()), LastSeen()
    request, first, now = sent_up_to_the_retried_one(session, masker, table)
    assert first.plan.bill is not None and first.plan.bill.history is not None
    key = first.plan.bill.history
    braking = table.add_surprise(key, now + 1.0, surprise=10.0**9, room=0.0,
                                 end=first.plan.bill.request_items - 1)
    assert braking.braked_from is not None
    again, plans = planned_while(
        lambda: masker.mask(bytes(request), session.fmt, visit=Visit(table, now + 5.0)))
    assert plans >= 1
    assert isinstance(again, Masked)
    assert again.plan.bill is not None
    assert again.plan.bill.braked_from == braking.braked_from != first.plan.bill.braked_from


def test_a_retry_given_a_table_when_the_first_was_given_none_is_planned_anew(session):
    masker = Masker(shipped())
    client = ClientRequests(session)
    request = client.request(session.request_ends[RETRIED]).body
    first = masker.mask(request, session.fmt)
    table = LastSeen()
    again, plans = planned_while(
        lambda: masker.mask(bytes(request), session.fmt, visit=Visit(table, 1000.0)))
    assert plans >= 1
    assert isinstance(first, Masked) and isinstance(again, Masked)
    assert first.plan.bill is not None and first.plan.bill.history is None
    assert again.plan.bill is not None and again.plan.bill.history is not None
    # The visit it made is in the table now.
    assert table.sighting(HistoryKey(again.plan.bill.history, None)) is not None


def test_the_same_bytes_under_another_policy_sharing_the_kept_requests_are_planned_anew(session):
    masker, table = Masker(shipped()), LastSeen()
    request, first, now = sent_up_to_the_retried_one(session, masker, table)
    wider = shipped(price_model="none", min_free_percent=0)
    again, plans = planned_while(lambda: rewrite.mask_request_body(
        bytes(request), wider, session.fmt, visit=Visit(table, now + 5.0),
        previous=masker.previous))
    assert plans >= 1
    assert isinstance(again, Masked) and again.plan is not first.plan
    assert again.plan.decisions != first.plan.decisions


def test_a_request_sent_unchanged_is_sent_unchanged_again_without_a_plan(session):
    masker = Masker(shipped())
    request = ClientRequests(session).request(session.request_ends[0]).body
    first = masker.mask(request, session.fmt)
    again, plans = planned_while(lambda: masker.mask(bytes(request), session.fmt))
    assert isinstance(first, Unchanged) and isinstance(again, Unchanged)
    assert plans == 0
    assert again.reason == first.reason and again.plan is first.plan


def test_with_recall_a_retry_is_planned_anew(session):
    """The recall store may have changed between the two: nothing is kept."""
    masker = Masker(shipped())
    request = ClientRequests(session).request(session.request_ends[RETRIED]).body
    masker.mask(request, session.fmt, recall=True)
    _, plans = planned_while(lambda: masker.mask(bytes(request), session.fmt, recall=True))
    assert plans >= 1


def test_a_retry_planned_again_from_its_own_checkpoint_bills_the_request_once(session):
    """With the kept request gone but the frontier's checkpoint kept, a
    retry is planned anew and its replay resumes where the first one
    ended, at the same request end: it replays no request, so its bill is
    the first one's, not one with the request counted twice."""
    masker, table = Masker(shipped()), LastSeen()
    request, first, now = sent_up_to_the_retried_one(session, masker, table)
    masker.previous.clear()
    again, plans = planned_while(
        lambda: masker.mask(bytes(request), session.fmt, visit=Visit(table, now + 5.0)))
    assert plans == 1
    assert isinstance(again, Masked) and again.plan is not first.plan
    assert again.body == first.body
    assert again.plan.bill is not None and first.plan.bill is not None
    assert (again.plan.bill.requests, again.plan.bill.with_masking) == \
        (first.plan.bill.requests, first.plan.bill.with_masking)
