"""OpenAI's automatic prompt cache, as the ledger prices a request under it
(``cache_billing``): each request is read from the cache as far as it
shares a prefix with the previous one."""

from __future__ import annotations

from obsmask_core.conversation.billing.cache_billing import BillingState, Forwarded, PrefixState
from obsmask_core.conversation.billing.price_models import PRICE_UNIT, PriceModel


class PrefixBilling:
    """The longest-common-prefix cache: each request shares with the previous
    one all of it, as sent, or up to its first change, as forwarded."""

    name = "prefix"

    def __init__(self, model: PriceModel) -> None:
        self.model = model
        self._previous_plain = 0
        self._previous_masked = 0
        self._predicted = (0, 0, 0)

    @property
    def minimum(self) -> int:
        return self.model.minimum_cached

    def smallest_saving(self, tokens: int, allowance_percent: int) -> int:
        """A cache that serves its prefix in steps may serve a masked
        request of F freed tokens up to F + step - 1 tokens less than the
        original: it costs at most (step - 1) * (uncached - read) - F * read
        more. Every later request, of ``tokens`` or more, adds at least
        ``allowance_percent`` of its read (tokens * read) to what the bill
        so far may exceed the original's by; once the reads of the freed
        tokens pay for what that leaves of the step, no request between
        two moves can take the bill so far past the allowance."""
        model = self.model
        if model.cache_step <= 1 or not model.has_cache:
            return 0
        step = (model.cache_step - 1) * (model.uncached - model.read)
        covered = allowance_percent * model.read * tokens // 100
        return 0 if covered >= step else (step - covered) // model.read + 1

    def plain_cost(self, end: int, tokens: int) -> int:
        return self.model.cost(tokens, self._previous_plain)

    def _shared(self, forwarded: Forwarded) -> int:
        if forwarded.changed_at is None:
            return self._previous_masked
        return min(self._previous_masked, forwarded.tokens_before_change)

    def masked_cost(self, forwarded: Forwarded) -> int:
        return self.model.cost(forwarded.tokens, self._shared(forwarded))

    def record(self, end: int, plain_tokens: int, forwarded: Forwarded) -> int:
        shared = self._shared(forwarded)
        cost = self.model.cost(forwarded.tokens, shared)  # ``masked_cost``, before the record
        read = self.model.cached(min(shared, forwarded.tokens))
        # A write is billed apart only where it costs more than plain input.
        written = forwarded.tokens - read if self.model.uncached > PRICE_UNIT else 0
        self._predicted = (read, written, forwarded.tokens)
        self._previous_plain = plain_tokens
        self._previous_masked = forwarded.tokens
        return cost

    def expire(self) -> None:
        self._previous_plain = self._previous_masked = 0

    def predicted(self) -> tuple[int, int, int]:
        return self._predicted

    def forget_before(self, lowest_mark: int) -> None:
        """Nothing to forget: only the previous requests are read."""

    def doubt(self) -> None:
        """Nothing to forget: a request reads only what the previous one
        wrote (or read), which a request after a pause wrote again."""

    def state(self) -> PrefixState:
        return PrefixState(self._previous_plain, self._previous_masked, self._predicted)

    def restore(self, state: BillingState) -> None:
        assert isinstance(state, PrefixState)
        self._previous_plain, self._previous_masked, self._predicted = state

