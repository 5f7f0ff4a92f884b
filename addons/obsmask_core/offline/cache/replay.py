"""One session replayed request by request under one policy, and billed.

Per request, in the order and at the times of the session:

1. the body the client sends (``obsmask_core.offline.cache.clients``: JSON bytes;
   Anthropic's as Claude Code sends them, with its breakpoints);
2. what obsmask forwards: ``Masker(policy).mask(body, fmt)``, the
   proxy's own rewrite, bytes in and bytes out; a ``Masked`` outcome's body
   goes, any other outcome (unchanged, refused, unreadable) sends the
   client's body;
3. the forwarded bytes parsed, read as a prompt (``obsmask_core.offline.cache.prompts``)
   and billed under every cache rule of ``obsmask_core.offline.cache.model``, each rule
   with its own cache for this replay.

The replay also counts the outcomes of the rewrite, and the forwarded
bodies that break Anthropic's breakpoint rules (more than four, or a
client's breakpoint moved or removed): protocol errors, which masking must
never cause.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from obsmask_core.conversation.billing.last_seen import LastSeen, Visit
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked, RewriteOutcome
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.offline.cache.billing import SessionBill
from obsmask_core.offline.cache.block_tokens import MessageTokens
from obsmask_core.offline.cache.clients import ClientRequests, Request
from obsmask_core.offline.cache.model import PromptCaches
from obsmask_core.offline.cache.prompt_blocks import Prompt, Segment
from obsmask_core.offline.cache.prompts import ItemReadings, PromptReader, breakpoint_errors
from obsmask_core.offline.cache.sessions import Session
from obsmask_core.offline.errors import OfflineError

OUTCOMES = ("masked", "unchanged", "refused", "unreadable")


def forward(body: bytes, masker: Masker, fmt: WireFormat,
            visit: Visit | None = None) -> RewriteOutcome:
    """What the proxy does with one request body (the single call into the
    masking code, to adapt if its signature changes); with ``visit``, at
    the request's time, as the proxy's table of when conversations were
    last seen has it (``cold_after_seconds``)."""
    return masker.mask(body, fmt, visit=visit)


def outcome_name(outcome: RewriteOutcome) -> str:
    return type(outcome).__name__.lower()


def forwarded_request(body: bytes, fmt: WireFormat) -> Request:
    """A forwarded body read back: its members and its list."""
    document = orjson.loads(body)
    items = document.get(fmt.list_member) if isinstance(document, dict) else None
    if not isinstance(document, dict) or not isinstance(items, list):
        raise OfflineError(f"a forwarded body has no {fmt.list_member!r} list")
    head = {key: value for key, value in document.items() if key != fmt.list_member}
    return Request(head, items)


@dataclass
class ProtocolErrors:
    """Forwarded bodies that break Anthropic's breakpoint rules."""

    over_four_breakpoints: int = 0
    client_breakpoint_moved_or_removed: int = 0

    @property
    def total(self) -> int:
        return self.over_four_breakpoints + self.client_breakpoint_moved_or_removed


@dataclass
class PolicyRun:
    bill: SessionBill
    masked_last_request: int
    tool_results_last_request: int
    input_tokens_last_request: int
    outcomes: dict[str, int] = field(default_factory=dict)
    protocol_errors: ProtocolErrors = field(default_factory=ProtocolErrors)


@dataclass
class _Replay:
    """One policy's replay of a session, request after request."""

    masker: Masker  # the policy, and what masking keeps under it
    reader: PromptReader
    caches: PromptCaches = field(default_factory=PromptCaches)
    bill: SessionBill = field(default_factory=SessionBill)
    outcomes: Counter[str] = field(default_factory=lambda: Counter(dict.fromkeys(OUTCOMES, 0)))
    errors: ProtocolErrors = field(default_factory=ProtocolErrors)
    previous: Prompt | None = None
    last: Request | None = None  # the last request forwarded
    # The proxy's table of when the conversation was last seen.
    last_seen: LastSeen = field(default_factory=LastSeen)


def replay_policies(session: Session, policies: dict[str, MaskPolicy],
                    tokens: MessageTokens) -> dict[str, PolicyRun]:
    """Bill every request of ``session`` as obsmask forwards it under each
    of ``policies``. The policies take each request in turn, so the
    client's body is made once for all of them."""
    client = ClientRequests(session)
    items = ItemReadings(session.fmt, tokens, client.items)
    replays = {name: _Replay(Masker(policy), PromptReader(items))
               for name, policy in policies.items()}
    sent_reader = PromptReader(items)
    last_sent: Request | None = None
    for end, time in zip(session.request_ends, session.times, strict=True):
        sent = client.request(end)
        as_sent = sent_reader.read(sent.request)
        for run in replays.values():
            outcome = forward(sent.body, run.masker, session.fmt, Visit(run.last_seen, time))
            run.outcomes[outcome_name(outcome)] += 1
            if isinstance(outcome, Masked):
                forwarded = forwarded_request(outcome.body, session.fmt)
                reading = run.reader.read(forwarded)
            else:
                forwarded, reading = sent.request, as_sent
            wrong = breakpoint_errors(as_sent.breakpoints, reading.breakpoints)
            run.errors.over_four_breakpoints += wrong.over_limit
            run.errors.client_breakpoint_moved_or_removed += wrong.client_moved_or_removed
            run.previous = reading.prompt(time, run.previous)
            run.bill.add(run.caches.bill(run.previous))
            run.last = forwarded
        last_sent = sent.request
    results = tool_results(session)
    return {name: PolicyRun(run.bill, _changed(last_sent, run.last), results,
                            run.previous.total if run.previous is not None else 0,
                            dict(run.outcomes), run.errors)
            for name, run in replays.items()}


def _changed(sent: Request | None, forwarded: Request | None) -> int:
    """Items of the last request that obsmask changed."""
    if sent is None or forwarded is None:
        return 0
    return sum(1 for old, new in zip(sent.items, forwarded.items, strict=False) if old != new)


def replay(session: Session, policy: MaskPolicy, tokens: MessageTokens,
           originals: Sequence[Segment] | None = None) -> PolicyRun:
    """``replay_policies`` for one policy. ``originals`` is not read (the
    blocks are read from each forwarded body); it stays for the callers
    that pass it."""
    return replay_policies(session, {"policy": policy}, tokens)["policy"]


def tool_results(session: Session) -> int:
    """Tool results in the session's last request, whatever the format
    (orphans, which answer no earlier call, included)."""
    index = session.fmt.index(session.messages[: session.request_ends[-1]])
    return len(index.results) + len(index.orphans)
