"""The requests of a conversation as the frontier forwards them, for its
ledger (``frontier``): how long each is, the provider's cache they are
billed under, where the frontier breakpoint goes in each, what each costs
as forwarded, and what the provider should read and write for this one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from obsmask_core.conversation.billing.breakpoint_billing import (
    OPENAI_REACH,
    BreakpointBilling,
)
from obsmask_core.conversation.billing.breakpoints import (
    CacheLayout,
    blocks_of,
    closing_block,
    implicit_breakpoint,
    prompt_chars,
)
from obsmask_core.conversation.billing.cache_billing import Billing, Forwarded
from obsmask_core.conversation.billing.ledger import BillSoFar, Ledger, Prediction, prefix_tokens
from obsmask_core.conversation.billing.model_table import CacheRule
from obsmask_core.conversation.billing.prefix_billing import PrefixBilling
from obsmask_core.conversation.billing.price_models import PriceModel, for_format, openai_cache
from obsmask_core.conversation.billing.request_price import RequestPrice
from obsmask_core.conversation.billing.terms import BillingTerms
from obsmask_core.conversation.frontier.replay_checkpoint import Checkpoint
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.turn_model import ToolTurnIndex


class ForwardedRequests:
    """The forwarded requests of the conversation that ``items`` (this
    request's) holds, under ``policy``'s price model and the provider's
    cache (``layout``: an Anthropic request's breakpoints)."""

    def __init__(self, index: ToolTurnIndex, items: Sequence[object], policy: MaskPolicy,
                 terms: BillingTerms) -> None:
        layout, cold_ends, price = terms.layout, terms.cold_ends, terms.price
        self._index = index
        self._item_list = items
        self._layout = layout
        self._price = price
        # blocks_before[i]: the blocks of the items before item i, for the
        # lookback of Anthropic's cache (measured only under it).
        self.blocks_before = [0]
        self.ledger = ledger_for(policy, layout, self.blocks_before, price)
        # The request ends (items) the conversation came back to after the
        # cache's lifetime; without a ledger every move is free anyway.
        self.cold_ends = cold_ends if self.ledger is not None else frozenset()
        # And those it came back to after a pause the cache may have outlived.
        self.doubtful_ends = terms.doubtful_ends if self.ledger is not None else frozenset()
        self._history = terms.history
        # The forwarded requests carry the frontier breakpoint once something
        # is masked: where the client marks its request's end and leaves a
        # slot free (``breakpoints``).
        self._marks_frontier = (policy.frontier_breakpoint and layout is not None
                                and layout.marks_end and layout.free_slot)
        # chars_before[i]: characters of the items before item i. Only the
        # rules that measure the request need it; the plain window does not.
        self._measures = bool(policy.trigger_tokens or policy.min_free_percent
                              or policy.max_input_tokens or self.ledger)
        self.chars_before = [0]
        # closing_blocks[i]: item i's ``closing_block`` (-1: none), when the
        # requests carry the frontier breakpoint. Measured as the items come,
        # so that where the breakpoint may go is known without reading the
        # older items again: a body grown from a kept request is then never
        # read whole for it (``grown_body``).
        self.closing_blocks: list[int] = []

    def measure(self, resume: Checkpoint | None) -> None:
        """Measure the items (``chars_before``, and ``blocks_before`` under
        Anthropic's cache), from where the replay ``resume`` comes from
        left off."""
        items = self._item_list
        if self._measures:
            if resume is not None:
                self.chars_before = list(resume.chars_before)
            total = self.chars_before[-1]
            for item in items[len(self.chars_before) - 1:]:
                total += prompt_chars(item)
                self.chars_before.append(total)
        if self._marks_frontier:
            if resume is not None:
                self.closing_blocks = list(resume.closing_blocks)
            self.closing_blocks += [_closing_block_or_none(item)
                                    for item in items[len(self.closing_blocks):]]
        if self.ledger is not None and isinstance(self.ledger.billing, BreakpointBilling):
            if resume is not None:
                self.blocks_before[:] = resume.blocks_before
            blocks = self.blocks_before[-1]
            for item in items[len(self.blocks_before) - 1:]:
                blocks += blocks_of(item)
                self.blocks_before.append(blocks)

    def layout_key(self) -> tuple[object, ...] | None:
        """The breakpoints and prices the requests are billed under
        (``CacheLayout.key``; the price model, its cache rule, what comes
        before the messages and the alternatives' terms)."""
        layout = self._layout.key() if self._layout is not None else None
        price = self._price
        if price is None:
            return layout
        return layout, price.model, price.cache, price.preamble_tokens, price.others

    def blocks_measured(self) -> tuple[int, ...]:
        """``blocks_before``, for a checkpoint (empty when not measured)."""
        return tuple(self.blocks_before) if len(self.blocks_before) > 1 else ()

    def judged_end(self, end: int) -> int:
        """The request of ``end`` items as the frontier judges its moves:
        without the system messages it ends with. These are the client's
        notes for that turn, which its next request rewrites (Claude Code
        drops the guidance and the breakpoint from its latest reminder): a
        move judged with them could be judged otherwise by every later
        request, and a result masked now go out unmasked again."""
        items = self._item_list
        while end > 0 and isinstance(item := items[end - 1], dict) \
                and item.get("role") in ("system", "developer"):
            end -= 1
        return end

    def cold_up_to(self, items: int) -> frozenset[int]:
        """The cold ends a replay of the first ``items`` items bills at."""
        return frozenset(end for end in self.cold_ends if end <= items)

    def doubtful_up_to(self, items: int) -> frozenset[int]:
        """The doubtful ends a replay of the first ``items`` items meets."""
        return frozenset(end for end in self.doubtful_ends if end <= items)

    def bill(self, braked_from: int | None,
             predicted: Prediction | None = None) -> BillSoFar | None:
        """The ledger at this request (None without a price model with a
        cache), its frontier stopped by the provider's brake from
        ``braked_from`` (``braking``), with ``predicted`` (``Ledger.so_far``)."""
        if self.ledger is None:
            return None
        items = len(self._item_list)
        ends = set(self._index.request_ends(items)) if self.cold_ends or self.doubtful_ends \
            else set()
        return self.ledger.so_far(
            price_row=self._price.as_metadata() if self._price is not None else None,
            cold_ends=tuple(sorted(self.cold_ends & ends)), request_items=items,
            braked_from=braked_from, predicted=predicted,
            doubtful_ends=tuple(sorted(self.doubtful_ends & ends)), history=self._history)

    def prediction_points(self) -> tuple[int | None, int | None] | None:
        """Where the provider should read this request up to, and write it
        up to, in item boundaries (0: the tools and system alone; None:
        nothing), under Anthropic's cache; None under another."""
        if self.ledger is None or not isinstance(self.ledger.billing, BreakpointBilling):
            return None
        return self.ledger.billing.prediction_points()

    def breakpoint_place(self, turn: int, masks_something: bool) -> tuple[int, int] | None:
        """The item whose last block takes the frontier breakpoint in this
        request, its frontier at ``turn``, and that block's number (None:
        none)."""
        mark = self.mark(turn, masks_something, len(self._item_list))
        if mark is None:
            return None
        block = self.closing_block(mark - 1)
        assert block is not None  # a mark is placed only where a block takes it
        return mark - 1, block

    def mark(self, turn: int, masks_something: bool, end: int) -> int | None:
        """The item boundary the frontier breakpoint closes in a forwarded
        request of ``end`` items whose frontier is at ``turn``: just before
        that turn's results, after its call (everything before is decided).
        None: no breakpoint (nothing masked yet, or no block to put it on)."""
        if not self._marks_frontier or not masks_something or turn >= len(self._index.turns):
            return None
        item = self._index.turns[turn].last
        if item + 1 >= end or self.closing_block(item) is None:
            return None
        return item + 1

    def closing_block(self, item: int) -> int | None:
        """``closing_block`` of item ``item``, as measured; asked only where
        the requests carry the frontier breakpoint (``mark``)."""
        block = self.closing_blocks[item]
        return block if block >= 0 else None

    def forwarded(self, end: int, counted: int, changed: tuple[int, int] | None,
                  turn: int, masks_something: bool) -> Forwarded:
        """The request of ``end`` items as forwarded with ``counted`` freed
        before the frontier at ``turn``, changed first at ``changed``."""
        chars = self.chars_before
        changed_at, before = changed if changed is not None else (None, 0)
        mark = self.mark(turn, masks_something, end)
        return Forwarded(
            end, prefix_tokens(chars[end] - counted, end), changed_at, before, mark,
            prefix_tokens(chars[mark] - counted, mark) if mark is not None else 0)

    def lowest_mark(self, end: int, turn: int) -> int:
        """The earliest item boundary a later request's breakpoint may
        close: its end, or the frontier's at ``turn`` (which only moves
        forward)."""
        turns = self._index.turns
        if self._marks_frontier and turn < len(turns):
            return min(end, turns[turn].last + 1)
        return end


def _closing_block_or_none(item: object) -> int:
    block = closing_block(item)
    return -1 if block is None else block


def ledger_for(policy: MaskPolicy, layout: CacheLayout | None,
               blocks_before: Sequence[int], price: RequestPrice | None = None) -> Ledger | None:
    """The ledger of ``policy``'s price model under the provider's cache:
    Anthropic's breakpoints when the request is an Anthropic one whose
    client marks its end (or marks no message at all: nothing among the
    messages is cached then), else OpenAI's automatic prefix cache (Chat
    Completions and Responses), or from GPT-5.6 on OpenAI's breakpoints
    (one implicit at the end of each request: ``implicit_breakpoint``). An
    Anthropic client whose breakpoints stay fixed among the messages is
    billed under the longest common prefix. ``price``: the request's own
    prices (its model's row, and for a model the table does not know the
    terms of each row of its provider, which every move must pay under
    too); without one, those ``policy``'s price model names for its
    provider."""
    if price is not None:
        model, cache, preamble = price.model, price.cache, price.preamble_tokens
    else:
        model, preamble = for_format(policy.price_model, layout is not None), 0
        cache = "anthropic_breakpoints" if layout is not None else "openai_prefix_steps"
        if layout is None:
            model = openai_cache(model)  # every format but Anthropic's: OpenAI's cache
    if not model.has_cache:
        return None
    others = [Ledger(other, policy.allowance_percent,
                     _billing(other, rule, layout, blocks_before, preamble))
              for other, rule in (price.others if price is not None else ())]
    return Ledger(model, policy.allowance_percent,
                  _billing(model, cache, layout, blocks_before, preamble), others)


def _billing(model: PriceModel, cache: CacheRule, layout: CacheLayout | None,
             blocks_before: Sequence[int], preamble: int) -> Billing:
    """One request's billing under ``model`` and its cache rule."""
    if layout is None:
        if cache == "openai_prefix":
            return BreakpointBilling(model, implicit_breakpoint(model, preamble), blocks_before,
                                     OPENAI_REACH, name="openai_breakpoints")
        return PrefixBilling(model)
    if layout.marks_end or not layout.in_messages:
        if layout.minimum_tokens != model.minimum_cached:  # a copy only when it differs
            layout = replace(layout, minimum_tokens=model.minimum_cached)
        return BreakpointBilling(model, layout, blocks_before)
    return PrefixBilling(model)
