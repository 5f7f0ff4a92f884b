"""The masker: one policy and everything the rewrite keeps between requests
under it.

Agents send their whole history with every request, so masking keeps what
spares it the same work next time: each result's judgement and the
frontier's checkpoints (``planning.memory``), and each conversation's
previous request (``reuse``). All of it lives here, in one object the
conversation addon owns: a new policy makes a new masker, so nothing judged
under one policy is ever read under another, and nothing is shared between
two proxies in one process (or two tests). What it keeps never changes an
outcome: ``mask_request_body`` without a masker gives the same, later.
"""

from __future__ import annotations

from obsmask_core.conversation.billing.last_seen import Arrival
from obsmask_core.conversation.masking.outcomes import RewriteOutcome
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.planning.memory import PlanMemory
from obsmask_core.conversation.reuse.previous_requests import PreviousRequests
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import CHAT, WireFormat


class Masker:
    """Masks request bodies under ``policy``, keeping what the next request
    of each conversation can use. Safe to call from the event loop and the
    worker thread at once (the kept requests and checkpoints have their own
    locks; a judgement is stored or read in one dict operation)."""

    def __init__(self, policy: MaskPolicy, *, memory: PlanMemory | None = None,
                 previous: PreviousRequests | None = None) -> None:
        self.policy = policy
        self.memory = memory if memory is not None else PlanMemory()
        self.previous = previous if previous is not None else PreviousRequests()

    def mask(self, body: bytes, fmt: WireFormat = CHAT, *, recall: bool = False,
             visit: Arrival | None = None) -> RewriteOutcome:
        """``mask_request_body`` under this masker's policy, with what it
        keeps."""
        return mask_request_body(body, self.policy, fmt, recall=recall, visit=visit,
                                 memory=self.memory, previous=self.previous)

    def forget(self) -> None:
        """Judge every result afresh, replay every frontier in full and mask
        every request in full (the benchmarks' cold runs)."""
        self.memory.clear()
        self.previous.clear()

    def forget_requests(self) -> None:
        """Keep the judgements, but no checkpoint or previous request: the
        next request of a conversation is planned and masked in full."""
        self.memory.checkpoints.clear()
        self.previous.clear()
