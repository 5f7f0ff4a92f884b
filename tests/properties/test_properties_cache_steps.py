"""The smallest saving a move must make under a cache that serves its
prefix in steps (``PrefixBilling.smallest_saving``): once masking has freed
that many tokens, no request between two moves costs more than the
allowance lets the bill so far grow by, however the steps fall."""

from __future__ import annotations

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.billing.prefix_billing import PrefixBilling
from obsmask_core.conversation.billing.price_models import PRICE_MODELS, openai_cache

STEPPED = {name: openai_cache(model) for name, model in PRICE_MODELS.items()
           if openai_cache(model).has_cache}


@st.composite
def later_requests(draw: st.DrawFn) -> tuple[str, int, int, int, int, int]:
    """A model, an allowance, the request a move was made at (``tokens``),
    what masking freed there (at least the smallest saving, leaving the
    masked request at the cached minimum or more: the frontier makes no
    other move), and a later request between two moves: the previous one
    as sent (``previous``, which holds the moved one) and this one
    (``current``, which holds the previous)."""
    name = draw(st.sampled_from(sorted(STEPPED)))
    model = STEPPED[name]
    allowance = draw(st.integers(0, 5))
    tokens = draw(st.integers(model.minimum_cached, 200_000))
    smallest = PrefixBilling(model).smallest_saving(tokens, allowance)
    assume(tokens - smallest >= model.minimum_cached)
    freed = draw(st.integers(smallest, tokens - model.minimum_cached))
    previous = tokens + draw(st.integers(0, 5_000))
    current = previous + draw(st.integers(0, 5_000))
    return name, allowance, tokens, freed, previous, current


@settings(max_examples=2000, deadline=None)
# The steps at their worst: the original read a whole step more than its
# freed tokens would say, at the smallest saving under no allowance.
@example(("openai", 0, 3000, 1144, 3000 + 1143, 3000 + 1143))
@given(case=later_requests())
def test_a_masked_request_between_two_moves_stays_within_the_allowance(case):
    """Freed at least the smallest saving at a request of ``tokens``
    tokens, a later masked request costs at most the allowance's share of
    the original more, whichever way the 128-token steps fall."""
    name, allowance, _tokens, freed, previous, current = case
    model = STEPPED[name]
    plain = model.cost(current, previous)
    masked = model.cost(current - freed, previous - freed)
    assert (masked - plain) * 100 <= allowance * plain, (masked, plain)


def test_the_smallest_saving_shrinks_as_the_conversation_grows():
    """A step's worth of re-billing is paid for by the reads of the freed
    tokens and the allowance of every later request, which grows with the
    request: 1,144 tokens under GPT-5's prices with no allowance (or at the
    first request), fewer with 2% on a longer request, none once 2% of its
    reads covers a step."""
    billing = PrefixBilling(STEPPED["openai"])
    assert billing.smallest_saving(1024, 0) == 127 * 900 // 100 + 1
    assert billing.smallest_saving(0, 2) == 127 * 900 // 100 + 1
    assert billing.smallest_saving(20_000, 2) == (127 * 900 - 2 * 20_000) // 100 + 1
    assert billing.smallest_saving(57_150, 2) == 0
    assert PrefixBilling(PRICE_MODELS["anthropic"]).smallest_saving(1024, 0) == 0  # no steps
