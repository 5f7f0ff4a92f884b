"""What the provider bills for one request of a conversation, under its
prompt cache as it runs it: the ledger's two ways of pricing a request.

- ``PrefixBilling`` (``prefix_billing``): OpenAI's automatic cache. A
  request is read from the cache as far as it shares a prefix with the
  previous one (nothing under the model's minimum, then in steps:
  ``PriceModel.cached``).
- ``BreakpointBilling`` (``breakpoint_billing``): Anthropic's. A request
  writes an entry only at its breakpoints (``breakpoints``), and reads the
  longest entry that is one of its own prefixes ending at most
  ``LOOKBACK_BLOCKS`` boundaries before one of its breakpoints; tokens
  after its last breakpoint are plain input. The client's breakpoints of
  the earlier requests are not in this one: a client that marks the end of
  its request is taken to have marked the end of each (it moves the mark
  as the conversation grows), and obsmask's own (the frontier breakpoint)
  is replayed by the same rule that places it now.

Both are fed the same figures by the frontier: the items of each request,
their estimated tokens, and for the forwarded request the first item that
differs from the previous forwarded one and where the frontier breakpoint
closes (``Forwarded``). Prices are in thousandths of the base input price.
This module holds what the two share: those figures, the state each keeps
between requests, and what the ledger asks of either (``Billing``).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol


class Forwarded(NamedTuple):
    """A request as obsmask forwards it, as far as its bill depends on it:
    its ``end`` (items) and estimated ``tokens``; ``changed_at``, the first
    item that differs from the previous forwarded request (a newly masked
    result; None: none), with the tokens before it; ``frontier``, the item
    boundary the frontier breakpoint closes (None: none), with the tokens
    before it."""

    end: int
    tokens: int
    changed_at: int | None = None
    tokens_before_change: int = 0
    frontier: int | None = None
    frontier_tokens: int = 0


class PrefixState(NamedTuple):
    previous_plain: int
    previous_masked: int
    predicted: tuple[int, int, int]


class BreakpointState(NamedTuple):
    # (item boundary, tokens, number of the write that made it)
    entries: tuple[tuple[int, int, int], ...]
    previous_end: int | None
    previous_tokens: int
    predicted: tuple[int, int, int]
    points: tuple[int | None, int | None]
    writes: int = 0


BillingState = PrefixState | BreakpointState


class Billing(Protocol):
    name: str

    @property
    def minimum(self) -> int:
        """No masked request shorter than this is read from the cache."""
        ...

    def smallest_saving(self, tokens: int, allowance_percent: int) -> int:
        """The fewest tokens masking must have freed once the frontier has
        moved at a request of ``tokens``, so that no request between two
        moves takes the bill so far past ``allowance_percent``
        (``PrefixBilling.smallest_saving``)."""
        ...

    def plain_cost(self, end: int, tokens: int) -> int: ...

    def masked_cost(self, forwarded: Forwarded) -> int: ...

    def record(self, end: int, plain_tokens: int, forwarded: Forwarded) -> int:
        """Add the forwarded request of ``end`` items to the cache; what it
        cost (``masked_cost`` before the record: one count, not two)."""
        ...

    def forget_before(self, lowest_mark: int) -> None:
        """No later breakpoint closes an item boundary before ``lowest_mark``:
        what only such a breakpoint could read may go."""
        ...

    def doubt(self) -> None:
        """The request just recorded came after a pause the provider's cache
        may have outlived: if it did, every entry that request did not
        write again is gone. The forwarded requests count on none of them
        from here on (the requests as sent read only what the last one
        wrote: they lose nothing either way)."""
        ...

    def expire(self) -> None:
        """The cache has expired (the conversation came back after its
        lifetime): the next request, as sent and as forwarded, reads
        nothing."""
        ...

    def predicted(self) -> tuple[int, int, int]:
        """For the last forwarded request recorded: the tokens the provider
        should read from its cache, write to it, and take in all."""
        ...

    def state(self) -> BillingState: ...

    def restore(self, state: BillingState) -> None: ...
