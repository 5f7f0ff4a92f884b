"""The bill as the proxy's end-of-run summary gives it, for recorded flows:
each conversation's latest bill by the proxy's own ledger, added up per
price model (``totals.Totals``, the summary's own sums and words).

A request recorded through obsmask carries the record the proxy wrote, its
bill among it, and is counted as it is. One recorded without obsmask is
planned here as a replay through the proxy (``mitmdump -nr``) plans it:
the settings in force, the conversation's table of last sightings at the
time the request was recorded (so cold turns are the replay's), every token
counted; its record is written as the addon writes it. The provider's
brake, which weighs answers as they come, is left out: flows without a
record have no answer the proxy weighed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from obsmask_core.conversation.billing.last_seen import LastSeen, Visit
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcome_facts import outcome_metadata
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.settings.routes import Routes
from obsmask_core.offline.recorded_requests import recorded_requests
from obsmask_core.shared.read_back import word
from obsmask_core.shared.request_record import Key
from obsmask_core.shared.tokens import TokenCounter
from obsmask_core.totals.totals import Totals

# How long to wait for the token encoding to load, as a replay does.
ENCODING_WAIT_SECONDS = 60.0


def proxy_totals(paths: Sequence[Path], routes: Routes, policy: MaskPolicy) -> Totals:
    """The proxy's totals over the conversation requests of ``paths``."""
    totals = Totals()
    tokens = TokenCounter()
    masker, last_seen = Masker(policy), LastSeen()
    for path in paths:
        for recorded in recorded_requests(path):
            if word(recorded.obsmask.get(Key.ACTION)) is not None:
                totals.add_flow(recorded.obsmask, None)
                continue
            fmt = routes.format_of(recorded.method, recorded.path, recorded.host)
            if fmt is None or recorded.body is None or not policy.enabled:
                continue
            if not tokens.ready:
                tokens.start_loading()
                tokens.wait_until_loaded(ENCODING_WAIT_SECONDS)
            outcome = masker.mask(recorded.body, fmt, visit=Visit(last_seen, recorded.started))
            totals.add_flow(outcome_metadata(outcome, fmt.name, tokens, policy.window_turns,
                                             len(recorded.body)), None)
    return totals


def proxy_net_line(paths: Sequence[Path], routes: Routes, policy: MaskPolicy) -> str:
    """The summary's net bill line for ``paths``."""
    return proxy_totals(paths, routes, policy).net_line()
