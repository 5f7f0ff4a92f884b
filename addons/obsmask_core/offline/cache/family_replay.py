"""One session replayed under every model family of its wire format
(``obsmask_core.offline.cache.families``) and every policy, request by
request, and billed per line (a family under one reading of its cache).

Per family, every request goes out with the family's model id in its
``model`` member (``ClientRequests(session, model)``), so that a policy
with ``price_model = "auto"`` prices it by that model's row, as the proxy
would. Runs that must forward the same bodies are made once and billed
under the lines of every family they serve (``run_key``): a policy whose
``price_model`` has no cache ("none": the plain window, the no_cache
profile, masking off) never reads the model; one that does reads it only
through the row of its table the model is priced by (two families whose
models the table gives the same row share a run; a model it does not know
shares with none); and ``frontier_breakpoint`` does nothing outside
Anthropic Messages. The same figures, for a fraction of the time.

What is forwarded and how it is read and billed is ``replay``'s: the
proxy's own ``Masker``, a ``Masked`` outcome's body or else the client's,
read as a prompt and billed under each line's own cache for this replay.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from obsmask_core.conversation.billing.last_seen import LastSeen, Visit
from obsmask_core.conversation.billing.price_models import has_cache
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, WireFormat
from obsmask_core.offline.cache.block_tokens import MessageTokens
from obsmask_core.offline.cache.clients import ClientRequests, Request
from obsmask_core.offline.cache.families import (
    FAMILIES,
    Family,
    LineCache,
    families_of,
)
from obsmask_core.offline.cache.policy_json import policy_settings
from obsmask_core.offline.cache.prompt_blocks import Prompt
from obsmask_core.offline.cache.prompts import (
    ItemReadings,
    PromptParts,
    PromptReader,
    breakpoint_errors,
)
from obsmask_core.offline.cache.replay import (
    OUTCOMES,
    ProtocolErrors,
    forward,
    forwarded_request,
    outcome_name,
    tool_results,
)
from obsmask_core.offline.cache.sessions import Session

# The shipped settings with one price per provider, as obsmask priced every
# request before prices per model ("auto" then meant these): the line
# "today's" figures are measured by, in the same run.
ONE_PRICE_POLICY = "recommended_one_price"
ONE_PRICE: Mapping[str, str] = MappingProxyType({"anthropic": "anthropic", "openai": "openai"})


def policy_for(name: str, policy: MaskPolicy, family: Family) -> MaskPolicy:
    """``policy`` as it runs for ``family`` (``ONE_PRICE_POLICY``'s price
    model is its provider's one price)."""
    if name == ONE_PRICE_POLICY:
        return replace(policy, price_model=ONE_PRICE[family.provider])
    return policy


def reads_model(policy: MaskPolicy) -> bool:
    """Does the policy's plan depend on the request's model? Only through
    its prices, so only with a price model that has a cache."""
    return policy.enabled and has_cache(policy.price_model)


def run_key(name: str, policy: MaskPolicy, fmt: WireFormat, family: Family,
            own_model: object) -> tuple[object, ...]:
    """Runs with the same key forward the same bodies (but the ``model``
    member): see the module's docstring."""
    if not reads_model(policy):
        return (name,)
    if fmt is not ANTHROPIC and policy.frontier_breakpoint:
        policy = replace(policy, frontier_breakpoint=False)
    model = family.model if family.model is not None else own_model
    choice = policy.models.choose(family.provider, model)
    settings = json.dumps(policy_settings(policy), sort_keys=True)
    if not choice.known:
        # A model the table does not know may be priced under more than
        # its stand-in row: shared with no other family.
        return (settings, "unknown", family.name, str(model))
    return (settings, choice.row.name)


@dataclass
class LineRun:
    """One policy on one line of one session: the cost so far after each
    request, and the tokens read from the line's cache."""

    so_far: list[float] = field(default_factory=list)
    read: int = 0

    @property
    def cost(self) -> float:
        return self.so_far[-1] if self.so_far else 0.0


@dataclass
class FamilyRun:
    """One policy's replay for one family (or, for a policy that does not
    read the model, for all of them): its lines, the rewrite's outcomes and
    the protocol errors of its forwarded bodies."""

    lines: dict[str, LineRun]
    outcomes: dict[str, int]
    protocol_errors: ProtocolErrors
    masked_last_request: int
    tool_results_last_request: int
    input_tokens_last_request: int


@dataclass
class _Run:
    masker: Masker
    reader: PromptReader
    caches: dict[str, LineCache]
    bills: dict[str, LineRun]
    outcomes: Counter[str] = field(default_factory=lambda: Counter(dict.fromkeys(OUTCOMES, 0)))
    errors: ProtocolErrors = field(default_factory=ProtocolErrors)
    previous: Prompt | None = None
    last: Request | None = None
    last_seen: LastSeen = field(default_factory=LastSeen)


@dataclass
class _FamilyClient:
    """A family's requests as the client sends them, how they read, and
    the runs that forward them."""

    client: ClientRequests
    sent_reader: PromptReader
    runs: list[_Run]


def replay_families(session: Session, policies: dict[str, MaskPolicy], tokens: MessageTokens,
                    families: Sequence[Family] = FAMILIES) -> dict[str, dict[str, FamilyRun]]:
    """line name -> policy -> its run, for the lines of every family of
    ``families`` that bills ``session``'s format (none: an empty dict)."""
    runs: dict[tuple[object, ...], _Run] = {}
    fed: dict[str, dict[str, _Run]] = {}  # line -> policy -> run
    clients: list[_FamilyClient] = []
    for family in families_of(session.fmt.name, families):
        client = ClientRequests(session, family.model)
        items = ItemReadings(session.fmt, tokens, client.items)
        own: list[_Run] = []
        for name, given in policies.items():
            policy = policy_for(name, given, family)
            key = run_key(name, policy, session.fmt, family, session.members.get("model"))
            run = runs.get(key)
            if run is None:
                run = runs[key] = _Run(Masker(policy), PromptReader(items), {}, {})
                own.append(run)
            for line in family.lines():
                if line.name not in run.caches:
                    run.caches[line.name], run.bills[line.name] = line.cache(), LineRun()
                fed.setdefault(line.name, {})[name] = run
        clients.append(_FamilyClient(client, PromptReader(items), own))
    last_sent: Request | None = None
    for end, time in zip(session.request_ends, session.times, strict=True):
        for family_client in clients:
            if not family_client.runs:
                continue
            sent = family_client.client.request(end)
            as_sent = family_client.sent_reader.read(sent.request)
            for run in family_client.runs:
                _send(run, sent.request, sent.body, as_sent, session.fmt, time)
            last_sent = sent.request
    results = tool_results(session)
    done = {id(run): FamilyRun(run.bills, dict(run.outcomes), run.errors,
                               _changed(last_sent, run.last), results,
                               run.previous.total if run.previous is not None else 0)
            for run in runs.values()}
    return {line: {name: done[id(run)] for name, run in by_policy.items()}
            for line, by_policy in fed.items()}


def _send(run: _Run, request: Request, body: bytes, as_sent: PromptParts, fmt: WireFormat,
          time: float) -> None:
    """One request through the run's masker, read and billed under its lines."""
    outcome = forward(body, run.masker, fmt, Visit(run.last_seen, time))
    run.outcomes[outcome_name(outcome)] += 1
    if isinstance(outcome, Masked):
        forwarded = forwarded_request(outcome.body, fmt)
        reading = run.reader.read(forwarded)
    else:
        forwarded, reading = request, as_sent
    wrong = breakpoint_errors(as_sent.breakpoints, reading.breakpoints)
    run.errors.over_four_breakpoints += wrong.over_limit
    run.errors.client_breakpoint_moved_or_removed += wrong.client_moved_or_removed
    run.previous = reading.prompt(time, run.previous)
    for name, cache in run.caches.items():
        cost, read = cache.cost(run.previous)
        bill = run.bills[name]
        bill.so_far.append(bill.cost + cost)
        bill.read += read
    run.last = forwarded


def _changed(sent: Request | None, forwarded: Request | None) -> int:
    """Items of the last request that obsmask changed (the model member aside)."""
    if sent is None or forwarded is None:
        return 0
    return sum(1 for old, new in zip(sent.items, forwarded.items, strict=False) if old != new)
