"""One session replayed request by request under one policy, and billed.

Per request, the request's list is masked as the proxy would forward it
(masking is a pure function of the request), in the session's own wire
format; the cached tokens are the longest common prefix with the previous
request of the same policy, under the rules of ``benchlib.cache.model``.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchlib.cache.model import BreakpointCache, Segment, SessionBill, common_prefix
from benchlib.cache.sessions import Session
from benchlib.cache.tokens import MessageTokens
from obsmask_core.conversation.apply import mask_items
from obsmask_core.conversation.policy import MaskPolicy
from obsmask_core.conversation.wire_formats import WireFormat
from obsmask_core.shared.tokens import TOKENS_REPLY_PRIMING


def mask_messages(items: list[object], policy: MaskPolicy, fmt: WireFormat) -> list[object]:
    """One request as the proxy would forward it (the single call into the
    masking code, to adapt if its signature changes)."""
    return mask_items(items, policy, fmt)


@dataclass
class PolicyRun:
    bill: SessionBill
    masked_last_request: int
    tool_results_last_request: int
    input_tokens_last_request: int


def replay(session: Session, policy: MaskPolicy, tokens: MessageTokens,
           originals: list[Segment]) -> PolicyRun:
    """Bill every request of ``session`` masked with ``policy``, each against
    the previous request of the same policy. ``originals`` are the segments
    of the session's items, unmasked."""
    bill = SessionBill()
    breakpoints = BreakpointCache()
    # What is sent in front of the list (Anthropic's system, Responses'
    # instructions): the same in every request, never masked.
    front = [tokens.segment(session.preamble)] if session.preamble is not None else []
    previous: list[Segment] = []
    masked_count = input_tokens = 0
    for end in session.request_ends:
        prefix = session.messages[:end]
        masked = mask_messages(prefix, policy, session.fmt)
        segments: list[Segment] = list(front)
        masked_count = 0
        for position, message in enumerate(masked):
            # Unchanged items are the request's own objects: no JSON, no digest.
            if position < end and message is prefix[position]:
                segments.append(originals[position])
            else:
                segments.append(tokens.segment(message))
                if position >= end or message != prefix[position]:
                    masked_count += 1
        input_tokens = sum(len(tokens_of) for _, tokens_of in segments) + TOKENS_REPLY_PRIMING
        bill.add(input_tokens, common_prefix(previous, segments),
                 breakpoints.read_then_write(segments))
        previous = segments
    return PolicyRun(bill, masked_count, tool_results(session), input_tokens)


def tool_results(session: Session) -> int:
    """Tool results in the session's last request, whatever the format
    (orphans, which answer no earlier call, included)."""
    index = session.fmt.index(session.messages[: session.request_ends[-1]])
    return len(index.results) + len(index.orphans)
