"""The bill as the proxy's end-of-run summary gives it, for recorded flows
(its net line and its bill lines): each conversation's latest bill by the
proxy's own ledger, added up per price model (``totals.Totals``, the summary's own sums and words).

A flow obsmask left a record in is counted by that record, as a replay
through the proxy (``mitmdump -nr``) counts it: the request that went out
was the one recorded. One recorded without obsmask is planned here as such
a replay plans it: the settings in force, the conversation's table of last
sightings at the time the request was recorded (so cold turns are the
replay's), every token counted; its record is written as the addon writes
it. Two things of a replay are left out, and may make its line differ:
recall's placeholders (they name a recall id: the replay counts masking
with recall off), and the provider's brake, which a replay runs on the
usage of the recorded answers. Request body files are no flows: no proxy
saw them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from obsmask_core.conversation.billing.last_seen import LastSeen, Visit
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcome_facts import outcome_metadata
from obsmask_core.conversation.masking.outcomes import Unreadable
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.settings.routes import Routes
from obsmask_core.offline.recorded_requests import is_request_body_file, recorded_requests
from obsmask_core.shared.tokens import TokenCounter
from obsmask_core.totals.totals import Totals

# How long to wait for the token encoding to load, as a replay does.
ENCODING_WAIT_SECONDS = 60.0


def proxy_totals(paths: Sequence[Path], routes: Routes, policy: MaskPolicy) -> Totals:
    """The proxy's totals over the conversation requests of the flow files
    among ``paths``."""
    totals = Totals()
    tokens = TokenCounter()
    masker, last_seen = Masker(policy), LastSeen()
    for path in paths:
        if is_request_body_file(path):
            continue
        for recorded in recorded_requests(path):
            if recorded.recorded_through_obsmask:
                totals.add_flow(recorded.obsmask, None)
                continue
            fmt = routes.format_of(recorded.method, recorded.path, recorded.host)
            if fmt is None or not policy.enabled:
                continue
            if recorded.body is None:  # the proxy passes it through, unread
                totals.add_flow(outcome_metadata(Unreadable("body not recorded"), fmt.name,
                                                 tokens, policy, 0), None)
                continue
            if not tokens.ready:
                tokens.start_loading()
                tokens.wait_until_loaded(ENCODING_WAIT_SECONDS)
            outcome = masker.mask(recorded.body, fmt, visit=Visit(last_seen, recorded.started))
            totals.add_flow(outcome_metadata(outcome, fmt.name, tokens, policy,
                                             len(recorded.body)), None)
    return totals


def proxy_bill_lines(paths: Sequence[Path], routes: Routes,
                     policy: MaskPolicy) -> tuple[str, ...]:
    """The summary's bill lines for ``paths``: the net bill, then the bill
    added up per price model; none when the summary has none (no
    conversation request)."""
    totals = proxy_totals(paths, routes, policy)
    if not totals.requests.requests:
        return ()
    return (totals.net_line(), *totals.bill_lines())
