"""One conversation billed with and without obsmask
(``scripts/benchlib/measure/bill.py``): the cache benchmark's replay, and
each request's estimate taken back out of the bill so far, which adds up to
the replay's own totals."""

from __future__ import annotations

import pytest

from benchlib.cache.figures import session_figures
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.offline.cache.billing import SETTINGS_MODELS, benchmark_name
from obsmask_core.offline.cache.block_tokens import MessageTokens, load_encoder
from obsmask_core.offline.cache.model import CACHE_RULES
from obsmask_core.offline.cache.sessions import load_real_sessions
from obsmask_core.offline.measure.bill import WITHOUT_OBSMASK, bill_conversation, request_estimate
from support.processes import REPO

SESSIONS = REPO / "fixtures" / "sessions"
# A plain window of 2 tool turns: it masks in every format (the ledger's
# choices are the ledger's tests' to check).
POLICY = MaskPolicy(window_turns=2)


@pytest.fixture(scope="module")
def tokens() -> MessageTokens:
    return MessageTokens(load_encoder())


def _session(fmt: str):
    return next(s for s in load_real_sessions(SESSIONS, (fmt,)) if "django-10914" in s.name)


@pytest.mark.parametrize("fmt", ["chat", "anthropic", "responses"])
def test_the_bill_is_the_cache_benchmarks_replay(tokens, fmt):
    session = _session(fmt)
    bill = bill_conversation(session, POLICY, tokens)
    expected = session_figures(session, {"none": WITHOUT_OBSMASK, "obsmask": POLICY}, tokens)
    for model in SETTINGS_MODELS:
        without, with_obsmask = bill.cost(model)
        name = benchmark_name(model)
        assert round(without, 1) == expected["policies"]["none"]["cost"][name]
        assert round(with_obsmask, 1) == expected["policies"]["obsmask"]["cost"][name]
    assert bill.requests == expected["requests"]
    assert bill.cost(SETTINGS_MODELS[-1])[1] < bill.cost(SETTINGS_MODELS[-1])[0], "something masked"


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_the_requests_estimates_add_up_to_the_replays_totals(tokens, fmt):
    bill = bill_conversation(_session(fmt), POLICY, tokens)
    for run in (bill.without, bill.with_obsmask):
        estimates = [request_estimate(run.bill, n) for n in range(run.bill.requests)]
        assert sum(e.input_tokens for e in estimates) == run.bill.input_tokens
        for rule in CACHE_RULES:
            assert sum(e.cached[rule] for e in estimates) == run.bill.cached[rule], rule
        assert estimates[0].cached == dict.fromkeys(CACHE_RULES, 0), "nothing cached at first"
        assert all(0 <= e.cached[rule] <= e.input_tokens for e in estimates for rule in CACHE_RULES)


def test_masking_off_bills_the_same_with_and_without_obsmask(tokens):
    bill = bill_conversation(_session("chat"), MaskPolicy(enabled=False), tokens)
    assert all(bill.cost(model)[0] == bill.cost(model)[1] for model in SETTINGS_MODELS)
    assert all(bill.worst_so_far(model) == (1.0, 8) for model in SETTINGS_MODELS)
