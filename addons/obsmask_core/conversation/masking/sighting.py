"""A request's visit to the table of when conversations were last seen
(``billing.last_seen``): whether it visits, under which key and lifetime,
and what planning takes from what it finds."""

from __future__ import annotations

from collections.abc import Sequence

from obsmask_core.conversation.billing.breakpoints import CacheLayout
from obsmask_core.conversation.billing.cache_lifetime import NEVER_COLD, Lifetime, cache_lifetime
from obsmask_core.conversation.billing.history_key import HistoryDigest, history_of
from obsmask_core.conversation.billing.last_seen import Arrival, Sighting, TableVisit
from obsmask_core.conversation.billing.price_models import has_cache
from obsmask_core.conversation.billing.request_price import RequestPrice
from obsmask_core.conversation.masking.verify import ReadBody
from obsmask_core.conversation.reuse.records import Kept
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, WireFormat


def table_visit(request: ReadBody, answer_starts: Sequence[int], policy: MaskPolicy,
                fmt: WireFormat, layout: CacheLayout | None, price: RequestPrice | None,
                visit: Arrival | None, kept: Kept | None,
                ) -> tuple[TableVisit, HistoryDigest] | None:
    """How the request visits the table (None: it does not: no table, or
    neither cold turns nor the provider's brake on, or no cache), with the
    digest of its history to go on from. ``kept``: what the other members
    of a request this one begins with gave (its digest, and under OpenAI's
    rule its lifetime, which only those members decide). The client's
    items, not the ones recall filled in: every request of the
    conversation keys alike."""
    items = request.items
    if visit is None or not (policy.cold_turns_on or policy.provider_brake) \
            or not has_cache(policy.price_model) or not items:
        return None
    key, history = history_of(lambda: request.members, items, answer_starts,
                              kept.history if kept is not None else None)
    anthropic = fmt is ANTHROPIC
    if not anthropic and kept is not None and kept.priced_by is policy \
            and kept.lifetime is not None:
        lifetime: Lifetime = kept.lifetime
    else:
        lifetime = cache_lifetime(
            policy.cold_after_seconds, anthropic=anthropic,
            long_lived=layout is not None and layout.outlives_five_minutes,
            members=lambda: request.members,
            ttl_option=price is not None and price.cache == "openai_prefix")
    if not policy.cold_turns_on:
        # No pause is cold; a doubtful one still tells the ledger that the
        # entries the request did not write again may be gone.
        lifetime = Lifetime(NEVER_COLD, lifetime.doubtful_after)
    return TableVisit(key, len(items), lifetime), history


def sighting_of(visit: Arrival, planned: TableVisit, policy: MaskPolicy) -> Sighting:
    """What planning takes from the visit: the conversation's cold ends
    when cold turns are on (``cold_turns``), and the request end from which
    the provider's brake holds its frontier when that is on
    (``provider_brake``)."""
    found = planned.at(visit)
    return Sighting(found.cold_ends if policy.cold_turns_on else frozenset(),
                    found.braked_from if policy.provider_brake else None,
                    found.doubtful_ends)
