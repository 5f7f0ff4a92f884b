"""How the ledger prices one request under the provider's cache
(``conversation/billing/cache_billing.py``): Anthropic's breakpoints, where only a
breakpoint writes and a read reaches back 20 block boundaries, and OpenAI's
automatic prefix cache in steps of 128 tokens. Prices are in thousandths of
the base input price."""

from __future__ import annotations

import pytest

from obsmask_core.conversation.billing.breakpoint_billing import BreakpointBilling
from obsmask_core.conversation.billing.breakpoints import CacheLayout
from obsmask_core.conversation.billing.cache_billing import Forwarded
from obsmask_core.conversation.billing.prefix_billing import PrefixBilling
from obsmask_core.conversation.billing.price_models import PRICE_MODELS, openai_cache

ANTHROPIC = PRICE_MODELS["anthropic"]
MARK = {"type": "ephemeral"}
# Claude Code: two marked system blocks (a preamble too short to be cached
# on its own here), and a breakpoint at the end of every request.
CLAUDE_CODE = CacheLayout(outside_messages=2, in_messages=1, marks_end=True, control=MARK,
                          preamble_tokens=0)


def billing(layout: CacheLayout = CLAUDE_CODE, blocks: int = 1) -> BreakpointBilling:
    """Items of ``blocks`` blocks each, 200 items."""
    return BreakpointBilling(ANTHROPIC, layout, [blocks * i for i in range(201)])


def test_the_first_request_writes_everything_up_to_its_breakpoint():
    bill = billing()
    assert bill.plain_cost(2, 3000) == 3000 * 1250
    assert bill.masked_cost(Forwarded(2, 3000)) == 3000 * 1250


def test_the_next_request_reads_the_previous_one_and_writes_what_it_adds():
    bill = billing()
    bill.record(2, 3000, Forwarded(2, 3000))
    assert bill.plain_cost(4, 3500) == 3000 * 100 + 500 * 1250
    assert bill.masked_cost(Forwarded(4, 3500)) == 3000 * 100 + 500 * 1250
    assert bill.predicted() == (0, 3000, 3000)


def test_a_forwarded_read_reaches_back_twenty_block_boundaries_and_no_further():
    """The strict reading of "about 20 blocks", for what obsmask forwards:
    the previous end is read from the new end's breakpoint when at most 19
    boundaries lie between them (20 boundaries checked, its own included);
    a turn that adds 20 blocks is written whole."""
    near = billing(blocks=1)
    near.record(10, 3000, Forwarded(10, 3000))
    assert near.masked_cost(Forwarded(29, 4000)) == 3000 * 100 + 1000 * 1250  # 19 blocks on
    far = billing(blocks=1)
    far.record(10, 3000, Forwarded(10, 3000))
    assert far.masked_cost(Forwarded(30, 4000)) == 4000 * 1250  # 20 blocks on


def test_the_request_as_sent_is_taken_to_read_one_block_further_back():
    """The lenient reading, for the bill without masking: the entry 20
    blocks back is read too, so the bill masking is held to is never
    higher than a cache that reads it would make it; 21 blocks on, not."""
    lenient = billing(blocks=1)
    lenient.record(10, 3000, Forwarded(10, 3000))
    assert lenient.plain_cost(30, 4000) == 3000 * 100 + 1000 * 1250  # 20 blocks on
    far = billing(blocks=1)
    far.record(10, 3000, Forwarded(10, 3000))
    assert far.plain_cost(31, 4000) == 4000 * 1250  # 21 blocks on


def test_a_change_before_an_entry_makes_the_request_read_an_earlier_one():
    """The history changed at item 5: the entry the previous request wrote
    (at 8) is no longer a prefix, the one before (at 4) is, and it is within
    reach of the end."""
    bill = billing()
    bill.record(4, 2000, Forwarded(4, 2000))
    bill.record(8, 3000, Forwarded(8, 3000))
    change = Forwarded(12, 3200, changed_at=5, tokens_before_change=2100)
    assert bill.masked_cost(change) == 2000 * 100 + 1200 * 1250
    # Changed right at an entry's end: that entry is still a prefix.
    at = Forwarded(12, 3200, changed_at=8, tokens_before_change=2900)
    assert bill.masked_cost(at) == 3000 * 100 + 200 * 1250


def test_after_a_doubtful_pause_only_the_entries_that_request_wrote_are_read():
    """The request at 8 came after a pause the cache may have outlived: if
    it did, the entry at 4 is gone (only what the request at 8 wrote lives
    on), so a change at 5 reads nothing; the entry at 8 is still read."""
    bill = billing()
    bill.record(4, 2000, Forwarded(4, 2000))
    bill.record(8, 3000, Forwarded(8, 3000))
    bill.doubt()
    change = Forwarded(12, 3200, changed_at=5, tokens_before_change=2100)
    assert bill.masked_cost(change) == 3200 * 1250
    at = Forwarded(12, 3200, changed_at=8, tokens_before_change=2900)
    assert bill.masked_cost(at) == 3000 * 100 + 200 * 1250
    # OpenAI's prefix cache reads only what the previous request wrote.
    prefix = PrefixBilling(openai_cache(PRICE_MODELS["openai"]))
    prefix.record(4, 2000, Forwarded(4, 2000))
    before = prefix.state()
    prefix.doubt()
    assert prefix.state() == before


def test_the_frontier_breakpoint_is_read_when_the_end_is_out_of_reach():
    """The frontier's entry (written at 20 by the previous request) is 40
    blocks behind the new end, but the new frontier breakpoint, at 30,
    reaches it."""
    bill = billing(blocks=1)
    bill.record(25, 3000, Forwarded(25, 3000, frontier=20, frontier_tokens=2500))
    change = Forwarded(60, 5000, changed_at=22, tokens_before_change=2600, frontier=30,
                       frontier_tokens=2800)
    assert bill.masked_cost(change) == 2500 * 100 + 2500 * 1250
    without = Forwarded(60, 5000, changed_at=22, tokens_before_change=2600)
    assert bill.masked_cost(without) == 5000 * 1250


def test_without_a_breakpoint_among_the_messages_they_are_plain_input():
    layout = CacheLayout(outside_messages=2, in_messages=0, marks_end=False, control=None,
                         preamble_tokens=2000)
    bill = billing(layout)
    # The first request writes the system; later ones read it.
    assert bill.plain_cost(3, 1000) == 2000 * 1250 + 1000 * 1000
    bill.record(3, 1000, Forwarded(3, 1000))
    assert bill.plain_cost(5, 1500) == 2000 * 100 + 1500 * 1000
    assert bill.masked_cost(Forwarded(5, 900, changed_at=1)) == 2000 * 100 + 900 * 1000


def test_an_hours_lifetime_writes_at_twice_the_base_price():
    layout = CacheLayout(outside_messages=0, in_messages=1, marks_end=True,
                         control={"type": "ephemeral", "ttl": "1h"}, preamble_tokens=0)
    assert billing(layout).plain_cost(2, 3000) == 3000 * 2000


def test_under_the_minimum_nothing_is_written_or_read():
    bill = billing()
    assert bill.plain_cost(2, 1000) == 1000 * 1000
    bill.record(2, 1000, Forwarded(2, 1000))
    assert bill.plain_cost(4, 1100) == 1100 * 1250  # no entry to read: the first was too short
    assert bill.predicted() == (0, 0, 1000)


@pytest.mark.parametrize("name, smallest", [("anthropic", 127 * 1150 // 100 + 1),
                                            ("openai", 127 * 900 // 100 + 1),
                                            ("openai_50", 127 * 500 // 500 + 1)])
def test_a_stepped_cache_asks_a_move_to_free_what_a_step_can_cost(name, smallest):
    """OpenAI serves the shared prefix in steps of 128 tokens: a masked
    request may be read up to 127 tokens less than the original, which the
    reads of the freed tokens pay for once they are this many (with no
    allowance to take it: test_properties_cache_steps.py has the rest)."""
    assert PrefixBilling(openai_cache(PRICE_MODELS[name])).smallest_saving(5000, 0) == smallest
    assert PrefixBilling(PRICE_MODELS["anthropic"]).smallest_saving(5000, 0) == 0  # no steps
    assert billing().smallest_saving(5000, 0) == 0
