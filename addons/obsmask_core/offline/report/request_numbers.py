"""The numbers of one request that the page shows: its input tokens as the
client sent it and as it went out (``obsmask_core.offline.report.estimates``), what the
provider reported, what obsmask recorded about its masking, and what the
replayed policy decides. What obsmask recorded is read with
``obsmask_core.shared.read_back``: a figure that is no count, or beyond
2**53, is read as not recorded (a flow file may hold anything)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from obsmask_core.offline.cache.block_tokens import MessageTokens
from obsmask_core.offline.report.conversations import ConversationRequest
from obsmask_core.offline.report.estimates import prompt_tokens
from obsmask_core.offline.report.replayed_plans import ReplayedPlan
from obsmask_core.shared.read_back import count, mapping, word
from obsmask_core.shared.refetch_facts import REFETCHES_KEY, RefetchFacts
from obsmask_core.shared.request_record import Key, UsageKey
from obsmask_core.totals.cold import TurnFacts

NO_RECORD = "no record"  # obsmask wrote no metadata (not loaded, or masking off)
# Formats whose input_tokens leave out the tokens read from or written to
# the cache (conversation/usage/provider_usage.py: Anthropic's).
CACHE_OUTSIDE_INPUT = frozenset({"anthropic"})


def _count(recorded: Mapping[str, object], key: str) -> int | None:
    return count(recorded.get(key))


@dataclass(frozen=True)
class ProviderFigures:
    """The usage the provider reported for a request, as reported."""

    input_tokens: int | None
    cached_input_tokens: int | None
    cache_creation_input_tokens: int | None
    # Anthropic: input_tokens counts neither the cached tokens nor those
    # written to the cache; OpenAI: input_tokens includes the cached ones.
    cache_outside_input: bool

    @property
    def prompt_tokens(self) -> int | None:
        """The whole prompt the provider counted, whatever the format."""
        if self.input_tokens is None:
            return None
        if not self.cache_outside_input:
            return self.input_tokens
        return (self.input_tokens + (self.cached_input_tokens or 0)
                + (self.cache_creation_input_tokens or 0))

    @property
    def cached_percent(self) -> float | None:
        """The share of the prompt read from the cache, in percent."""
        prompt = self.prompt_tokens
        if not prompt or self.cached_input_tokens is None:
            return None
        return 100.0 * self.cached_input_tokens / prompt


def provider_figures(masking: Mapping[str, object], fmt_name: str) -> ProviderFigures | None:
    """The usage of ``flow.metadata["obsmask"]["provider_usage"]``; None
    when it holds no input figure that can be read."""
    usage = mapping(masking.get(Key.PROVIDER_USAGE))
    figures = (_count(usage, UsageKey.INPUT_TOKENS), _count(usage, UsageKey.CACHED_INPUT_TOKENS),
               _count(usage, UsageKey.CACHE_CREATION_INPUT_TOKENS))
    if all(figure is None for figure in figures):
        return None
    return ProviderFigures(*figures, fmt_name in CACHE_OUTSIDE_INPUT)


@dataclass(frozen=True)
class RequestNumbers:
    number: int  # 1-based in its conversation
    flow_number: int  # 1-based in the files
    action: str  # masked, unchanged, passed_through or NO_RECORD
    reason: str  # why it was left alone, as obsmask said
    tokens_without: int | None  # the body the client sent
    tokens_with: int | None  # the body that went out
    provider: ProviderFigures | None
    # As obsmask recorded them (None: not recorded for this request).
    frontier_turn: int | None
    tool_turns: int | None
    stage: str | None
    masked: int | None
    clipped: int | None
    # Tokens of the masked results before minus after, as obsmask counted them.
    masked_tokens_saved: int | None
    replayed: ReplayedPlan | None  # under the replayed policy; None: body unreadable
    # The re-fetches obsmask recorded (None: none in the conversation so far).
    refetches: RefetchFacts | None = None
    # Cold or warm, and its own estimated cost, as the proxy's ledger billed it.
    turn: TurnFacts | None = None


def request_numbers(request: ConversationRequest, tokens: MessageTokens,
                    replayed: ReplayedPlan | None) -> RequestNumbers:
    masking = request.recorded.masking
    action = word(masking.get(Key.ACTION))
    before = _count(masking, Key.MASKED_TOKENS_BEFORE)
    after = _count(masking, Key.MASKED_TOKENS_AFTER)
    return RequestNumbers(
        number=request.number,
        flow_number=request.recorded.flow_number,
        action=action if action is not None else NO_RECORD,
        reason=word(masking.get(Key.REASON)) or "",
        tokens_without=(prompt_tokens(request.original, request.recorded.fmt, tokens)
                        if request.original is not None else None),
        tokens_with=(prompt_tokens(request.sent, request.recorded.fmt, tokens)
                     if request.sent is not None else None),
        provider=provider_figures(masking, request.recorded.fmt.name),
        frontier_turn=_count(masking, Key.FRONTIER_TURN),
        tool_turns=_count(masking, Key.TOOL_TURNS),
        stage=word(masking.get(Key.STAGE)),
        masked=_count(masking, Key.MASKED_TOOL_RESULTS),
        clipped=_count(masking, Key.CLIPPED_TOOL_RESULTS),
        masked_tokens_saved=before - after if before is not None and after is not None else None,
        replayed=replayed,
        refetches=RefetchFacts.read(masking.get(REFETCHES_KEY)),
        turn=TurnFacts.read(masking.get(Key.BILL)),
    )
