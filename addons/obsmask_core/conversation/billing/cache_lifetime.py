"""How long a provider's prompt cache keeps a conversation's prefix, per
request: after that long unseen, the conversation's next request is cold
(``last_seen``), billed whole with or without masking."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# How long the providers keep a prefix nobody read (each read starts it
# again): Anthropic's entries 5 minutes, or an hour for those written with
# ttl "1h"; OpenAI's in-memory cache is always removed within an hour of
# its last use (its guide: typically after 5 to 10 minutes), a day with
# prompt_cache_retention "24h"; from GPT-5.6 on, prompt_cache_options' ttl
# when the client sets one longer than that hour (a shorter one is read as
# how long the entry is kept at least, not as a promise to forget it
# sooner: the reading least favourable to masking).
FIVE_MINUTES = 300
AN_HOUR = 3600
A_DAY = 24 * 3600
# Added to every lifetime: the pause is measured on this proxy's clock
# (or the clocks of the proxies sharing a table), from the previous
# request's arrival here, while the provider counts from when it read the
# prompt, which may come later (a queued or slow upload).
CLOCK_MARGIN_SECONDS = 60
# The lifetime of a visit that only moves the conversation's entry along
# (the brake without cold turns): no pause is ever that long.
NEVER_COLD = 10**12
_TTL = re.compile(r"(\d+)\s*(s|m|h|d)?")
_UNITS = "smhd"
_UNIT_SECONDS = (1, 60, 3600, 24 * 3600)


def ttl_seconds(ttl: object) -> int | None:
    """A ttl as clients write one (300, "300s", "5m", "1h", "24h"); None
    for anything else."""
    if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0:
        return ttl
    if isinstance(ttl, str) and (found := _TTL.fullmatch(ttl.strip().lower())):
        return int(found[1]) * _UNIT_SECONDS[_UNITS.index(found[2] or "s")]
    return None


@dataclass(frozen=True, slots=True)
class Lifetime:
    """How long a request's conversation may go unseen: after more than
    ``cold_after`` seconds the provider has forgotten its prefix for
    certain (a cold end: a move is free); after more than
    ``doubtful_after`` it may have (a doubtful end: the entries the
    request did not write again may be gone, and the ledger counts on none
    of them for the requests after it)."""

    cold_after: float
    doubtful_after: float


def cache_lifetime(cold_after_seconds: int, *, anthropic: bool, long_lived: bool,
                   members: Callable[[], Mapping[str, object]],
                   ttl_option: bool = False) -> Lifetime:
    """How long a conversation must have been unseen for its request to be
    taken as cold: ``cold_after_seconds`` when set (the user's word for a
    provider or gateway the rules below do not describe), else the
    provider's longest lifetime for the request and
    ``CLOCK_MARGIN_SECONDS``; and for it to be doubtful: the provider's
    shortest lifetime less that margin (``cold_after_seconds`` less twice
    it; under Anthropic's cache 5 minutes, even where some entries live an
    hour: the others do not). ``long_lived``: an Anthropic request some of
    whose breakpoints live an hour; ``ttl_option``: the
    request's model reads ``prompt_cache_options``' ttl (OpenAI, GPT-5.6
    and later); ``members`` gives the request's others
    (``prompt_cache_retention``, ``prompt_cache_options``), asked for only
    under OpenAI's rule (a grown body reads itself whole for them)."""
    if cold_after_seconds:
        return Lifetime(cold_after_seconds,
                        max(cold_after_seconds - 2 * CLOCK_MARGIN_SECONDS, 0))
    if anthropic:
        return Lifetime((AN_HOUR if long_lived else FIVE_MINUTES) + CLOCK_MARGIN_SECONDS,
                        FIVE_MINUTES - CLOCK_MARGIN_SECONDS)
    others = members()
    options = others.get("prompt_cache_options")
    ttl = ttl_seconds(options.get("ttl")) if ttl_option and isinstance(options, dict) else None
    # The in-memory cache may go after 5 minutes whatever the retention
    # asked; a GPT-5.6 ttl is how long an entry is kept at least.
    shortest = ttl or FIVE_MINUTES
    if others.get("prompt_cache_retention") == "24h":
        lifetime = A_DAY
    else:
        lifetime = max(ttl or 0, AN_HOUR)
    return Lifetime(lifetime + CLOCK_MARGIN_SECONDS, shortest - CLOCK_MARGIN_SECONDS)
