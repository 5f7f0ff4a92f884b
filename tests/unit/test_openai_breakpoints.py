"""OpenAI's cache from GPT-5.6 on, as the ledger prices it: one implicit
breakpoint at the end of each request writes an entry (writes billed at
1.25), a later request reads only an entry it matches exactly (never a
shorter unmarked prefix), among the latest 80 breakpoints (strictly: its
own among them, so 79 earlier ones), with no lookback in blocks. Prices
are in thousandths of the base input price."""

from __future__ import annotations

from obsmask_core.conversation.billing.breakpoint_billing import (
    OPENAI_BREAKPOINTS_CONSIDERED,
    OPENAI_REACH,
    BreakpointBilling,
)
from obsmask_core.conversation.billing.breakpoints import implicit_breakpoint
from obsmask_core.conversation.billing.cache_billing import Forwarded
from obsmask_core.conversation.billing.model_table import ModelTable

GPT_56 = ModelTable.shipped().choose("openai", "gpt-5.6").row.price_model()


def billing(items: int = 400) -> BreakpointBilling:
    return BreakpointBilling(GPT_56, implicit_breakpoint(GPT_56), [5 * i for i in range(items)],
                             OPENAI_REACH, name="openai_breakpoints")


def test_each_request_reads_the_last_one_and_writes_what_it_adds_at_one_and_a_quarter():
    bill = billing()
    assert bill.plain_cost(4, 2000) == 2000 * 1250
    bill.record(4, 2000, Forwarded(4, 2000))
    assert bill.plain_cost(8, 3000) == 2000 * 100 + 1000 * 1250
    bill.record(8, 3000, Forwarded(8, 3000))
    assert bill.predicted() == (2000, 1000, 3000)


def test_a_change_reads_the_last_entry_before_it_not_the_common_prefix():
    """The history changes at item 10 (a result masked): the entry at 8 is
    read, though 9,000 tokens would be shared up to the change; the
    entries at 12 and 16 are no longer prefixes."""
    bill = billing()
    for end, tokens in ((4, 2000), (8, 4000), (12, 6000), (16, 8000)):
        bill.record(end, tokens, Forwarded(end, tokens))
    changed = Forwarded(20, 7000, changed_at=10, tokens_before_change=4500)
    assert bill.masked_cost(changed) == 4000 * 100 + 3000 * 1250


def test_a_long_way_back_is_still_read_no_lookback_in_blocks():
    bill = billing()
    bill.record(4, 2000, Forwarded(4, 2000))
    # 300 items (1,500 blocks) later, the entry at 4 is still read.
    assert bill.masked_cost(Forwarded(304, 9000, changed_at=5, tokens_before_change=2100)) \
        == 2000 * 100 + 7000 * 1250


def test_only_the_latest_eighty_breakpoints_this_requests_own_among_them_are_read():
    bill = billing()
    bill.record(2, 2000, Forwarded(2, 2000))
    for request in range(1, OPENAI_BREAKPOINTS_CONSIDERED - 1):
        end = 2 + request
        bill.record(end, 2000 + request, Forwarded(end, 2000 + request))
    # 79 breakpoints written: with this request's, the first is the 80th.
    late = Forwarded(200, 5000, changed_at=2, tokens_before_change=2000)
    assert bill.masked_cost(late) == 2000 * 100 + 3000 * 1250
    bill.record(90, 2100, Forwarded(90, 2100))
    # One more: the first would be the 81st, and nothing is read.
    assert bill.masked_cost(late) == 5000 * 1250


def test_nothing_under_the_minimum_is_written_or_read():
    bill = billing()
    bill.record(2, 900, Forwarded(2, 900))
    assert bill.plain_cost(4, 1500) == 1500 * 1250
    assert bill.masked_cost(Forwarded(4, 1500)) == 1500 * 1250


def test_a_resumed_replay_bills_the_tools_as_they_are_now_like_a_full_one():
    """What comes before the messages (the tools) is part of what a
    checkpoint is kept under: when it changes, the replay starts again, so
    a masker that kept its checkpoints forwards what a new one does."""
    import json

    from obsmask_core.conversation.masking.masker import Masker
    from obsmask_core.conversation.settings.policy import MaskPolicy
    from obsmask_core.conversation.turns.wire_formats import CHAT

    policy = MaskPolicy(price_model="auto", allowance_percent=2, window_turns=3,
                        min_free_percent=0)

    def body(turns: int, tools_chars: int) -> bytes:
        messages: list[dict[str, object]] = [{"role": "system", "content": "sys " * 600},
                                             {"role": "user", "content": "do the task"}]
        for turn in range(turns):
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{turn}", "type": "function",
                 "function": {"name": "read", "arguments": json.dumps({"f": turn})}}]})
            messages.append({"role": "tool", "tool_call_id": f"c{turn}",
                             "content": f"line {turn} " * 300})
        tools = [{"type": "function", "function": {"name": "read", "description": "x" * tools_chars,
                                                   "parameters": {"type": "object"}}}]
        return json.dumps({"model": "gpt-5.6", "messages": messages, "tools": tools}).encode()

    kept = Masker(policy)
    for turns in range(1, 31):
        sent = body(turns, 400 if turns < 15 else 40_000)
        resumed, full = kept.mask(sent, CHAT), Masker(policy).mask(sent, CHAT)
        assert type(resumed) is type(full) and resumed.plan.masked == full.plan.masked, turns
        assert getattr(resumed, "body", None) == getattr(full, "body", None), turns
