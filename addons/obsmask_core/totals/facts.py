"""One flow's facts as obsmask left them in its metadata, read back with a
check of every value: a flow file may hold anything, and a wrong value
counts as absent rather than breaking the totals."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from obsmask_core.shared.cache_check import CacheCheck, CacheTokens
from obsmask_core.shared.read_back import amount, count, mapping, whole
from obsmask_core.shared.refetch_facts import REFETCHES_KEY, RefetchFacts
from obsmask_core.shared.request_record import TRUNCATED, Action, BillKey, Key, McpKey, UsageKey
from obsmask_core.totals.brake import BrakeFacts
from obsmask_core.totals.cold import TurnFacts

PROVIDER_FIELDS = (UsageKey.INPUT_TOKENS, UsageKey.CACHED_INPUT_TOKENS,
                   UsageKey.CACHE_CREATION_INPUT_TOKENS, UsageKey.OUTPUT_TOKENS)


def _count(facts: Mapping[str, object], key: str) -> int:
    return count(facts.get(key)) or 0


@dataclass(frozen=True)
class BillFacts:
    """The ledger's bill of a conversation so far, at one request."""

    price_model: str
    requests: int
    with_masking: float
    without_masking: float

    @classmethod
    def read(cls, value: object) -> BillFacts | None:
        facts = mapping(value)
        model, requests = facts.get(BillKey.PRICE_MODEL), count(facts.get(BillKey.REQUESTS))
        with_masking = amount(facts.get(BillKey.ESTIMATED_WITH_MASKING))
        without_masking = amount(facts.get(BillKey.ESTIMATED_WITHOUT_MASKING))
        if (not isinstance(model, str) or requests is None or with_masking is None
                or without_masking is None):
            return None
        return cls(model, requests, with_masking, without_masking)


@dataclass(frozen=True)
class CacheFacts:
    """The provider's cache at a request whose answer reported it: what the
    ledger predicted beside what the provider reported, in the same terms
    (``shared.cache_check``). ``fmt`` and ``cache`` (the wire format, the
    cache as the ledger ran it) say which model the two figures test."""

    fmt: str
    cache: str
    predicted: CacheTokens
    reported: CacheTokens

    @classmethod
    def read(cls, facts: Mapping[str, object]) -> CacheFacts | None:
        """None unless the flow has both the prediction and the report."""
        check = CacheCheck.read(facts)
        if check is None or check.reported is None:
            return None
        return cls(check.fmt, check.cache, check.predicted, check.reported)


@dataclass(frozen=True)
class RequestFacts:
    """A conversation request (``flow.metadata["obsmask"]``)."""

    action: str  # masked, unchanged or passed_through
    conversation: str | None
    # Which run of the conversation (None before the model's first answer).
    session: str | None
    held_out: bool
    masked_results: int
    clipped_results: int
    recalled_results: int
    # Tokens of the masked results' text before minus after (below 0 when
    # placeholders tokenise longer than the short texts they replaced);
    # None when the proxy could not count them (no encoding loaded).
    tokens_saved: int | None
    tool_chars_saved: int
    body_bytes_saved: int
    mask_ms: float | None
    bill: BillFacts | None
    # The provider's report, by field; empty when the answer had none.
    provider: dict[str, int]
    cache: CacheFacts | None = None
    # The re-fetches the request shows, when its conversation has any.
    refetches: RefetchFacts | None = None
    # The provider's brake, when it weighed the answer.
    brake: BrakeFacts | None = None
    # Why the provider's cache missed, when its answer said so.
    cache_miss_reason: str | None = None
    # Cold or warm, and its own cost, when the request has a bill.
    turn: TurnFacts | None = None

    @classmethod
    def read(cls, value: object) -> RequestFacts | None:
        facts = mapping(value)
        action = facts.get(Key.ACTION)
        if Key.ACTION not in facts and (
                Key.PROVIDER_USAGE in facts or Key.PROVIDER_USAGE_PROBLEM in facts):
            # Only the usage of the answer: the rewrite hit an internal
            # error and the request went out as it came.
            action = Action.PASSED_THROUGH
        if action not in (Action.MASKED, Action.UNCHANGED, Action.PASSED_THROUGH):
            return None
        conversation = facts.get(Key.CONVERSATION)
        before, after = (count(facts.get(Key.MASKED_TOKENS_BEFORE)),
                         count(facts.get(Key.MASKED_TOKENS_AFTER)))
        masked = action == Action.MASKED
        usage = mapping(facts.get(Key.PROVIDER_USAGE))
        provider = {name: tokens for name in PROVIDER_FIELDS
                    if (tokens := count(usage.get(name))) is not None}
        return cls(
            action=str(action),
            conversation=conversation if isinstance(conversation, str) else None,
            session=session if isinstance(session := facts.get(Key.SESSION), str) else None,
            held_out=facts.get(Key.HOLDOUT) is True,
            masked_results=_count(facts, Key.MASKED_TOOL_RESULTS),
            clipped_results=_count(facts, Key.CLIPPED_TOOL_RESULTS),
            recalled_results=_count(facts, Key.RECALLED_TOOL_RESULTS),
            tokens_saved=(before - after if before is not None and after is not None
                          else None) if masked else 0,
            tool_chars_saved=(_count(facts, Key.TOOL_CHARS_BEFORE)
                              - _count(facts, Key.TOOL_CHARS_AFTER)) if masked else 0,
            body_bytes_saved=(_count(facts, Key.BODY_BYTES_BEFORE)
                              - _count(facts, Key.BODY_BYTES_AFTER)) if masked else 0,
            mask_ms=amount(facts.get(Key.MASK_MS)),
            bill=BillFacts.read(facts.get(Key.BILL)),
            provider=provider,
            cache=CacheFacts.read(facts),
            refetches=RefetchFacts.read(facts.get(REFETCHES_KEY)),
            brake=BrakeFacts.read(facts.get(Key.BRAKE)),
            cache_miss_reason=reason if isinstance(
                reason := usage.get(UsageKey.CACHE_MISS_REASON), str) else None,
            turn=TurnFacts.read(facts.get(Key.BILL)),
        )


@dataclass(frozen=True)
class McpFacts:
    """An MCP flow (``flow.metadata["obsmask_mcp"]``)."""

    truncated: bool
    messages_truncated: int
    strings_cut: int
    chars_saved: int
    # Below 0 when the markers cost more tokens than the text they replaced;
    # None when the proxy could not count them (see the MCP summary).
    tokens_saved: int | None
    gateway_error: bool

    @classmethod
    def read(cls, value: object) -> McpFacts | None:
        if not isinstance(value, Mapping):
            return None
        truncated = value.get(McpKey.ACTION) == TRUNCATED
        return cls(
            truncated=truncated,
            messages_truncated=_count(value, McpKey.MESSAGES_TRUNCATED),
            strings_cut=_count(value, McpKey.STRINGS_CUT),
            chars_saved=_count(value, McpKey.CHARS_BEFORE) - _count(value, McpKey.CHARS_AFTER),
            tokens_saved=whole(value.get(McpKey.TOKENS_SAVED)) if truncated else 0,
            gateway_error=McpKey.GATEWAY_ERROR in value,
        )
