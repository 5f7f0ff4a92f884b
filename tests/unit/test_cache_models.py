"""The cache benchmark's models of the providers' prompt caches
(``obsmask_core.offline.cache.model``) and what they bill (``billing.py``),
the blocks a request is cut into (``tokens.py``, ``prompts.py``), how a
client sends a request (``clients.py``) and the replay that bills what
obsmask forwards (``replay.py``)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from obsmask_core.conversation.billing.price_models import PRICE_MODELS
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked, RewriteOutcome
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, WireFormat
from obsmask_core.offline.cache import replay as replay_module
from obsmask_core.offline.cache.billing import SessionBill, request_cost
from obsmask_core.offline.cache.block_tokens import MessageTokens, load_encoder
from obsmask_core.offline.cache.clients import CLAUDE_CODE_FIRST_BLOCK, ClientRequests, Request
from obsmask_core.offline.cache.model import (
    AnthropicCache,
    AnthropicRequest,
    OpenAICache,
    PromptCaches,
    openai_cached,
)
from obsmask_core.offline.cache.prompt_blocks import (
    FIVE_MINUTES,
    ONE_HOUR,
    Breakpoint,
    Prompt,
    make_prompt,
)
from obsmask_core.offline.cache.prompts import ItemReadings, PromptReader, breakpoint_errors
from obsmask_core.offline.cache.replay import replay, replay_policies
from obsmask_core.offline.cache.sessions import Session

BLOCK_TOKENS = 100  # every block of the prompts below


def blocks(count: int, start: int = 0, size: int = BLOCK_TOKENS,
           tag: str = "b") -> list[tuple[bytes, tuple[int, ...]]]:
    """``count`` blocks named ``tag`` + their number, each of ``size`` tokens."""
    return [(f"{tag}{number}".encode(), tuple(range(number * 1000, number * 1000 + size)))
            for number in range(start, start + count)]


def prompt(count: int, marks: Sequence[int | Breakpoint], time: float = 0.0,
           size: int = BLOCK_TOKENS, model: str = "m") -> Prompt:
    points = [mark if isinstance(mark, Breakpoint) else Breakpoint(mark) for mark in marks]
    return make_prompt(model, blocks(count, size=size), points, time)


# Anthropic's cache ---------------------------------------------------------------------


@pytest.mark.parametrize(("distance", "hit"), [(19, True), (20, False)])
def test_a_breakpoint_reads_an_entry_up_to_20_boundaries_back_and_not_further(distance, hit):
    """The first request writes the prefix of blocks 0-11 (1,200 tokens);
    a breakpoint on block 11 + 19 checks the boundaries after blocks 30
    down to 11 and finds it; one on block 11 + 20 stops at block 12."""
    cache = AnthropicCache()
    cache.request(prompt(12, [11]))
    read = cache.request(prompt(12 + distance, [11 + distance], time=20))
    assert read.read == (12 * BLOCK_TOKENS if hit else 0)


def test_of_several_breakpoints_the_longest_entry_found_is_read():
    cache = AnthropicCache()
    cache.request(prompt(12, [11]))
    cache.request(prompt(40, [39], time=10))
    read = cache.request(prompt(60, [11, 45], time=20))
    assert read.read == 40 * BLOCK_TOKENS


def test_nothing_under_the_minimum_is_written():
    cache = AnthropicCache()
    cache.request(prompt(10, [9]))  # 1,000 tokens
    assert cache.request(prompt(10, [9], time=10)).read == 0
    smaller = AnthropicCache(minimum_tokens=1000)
    smaller.request(prompt(10, [9]))
    assert smaller.request(prompt(10, [9], time=10)).read == 1000


def test_a_breakpoint_under_the_minimum_bills_its_tokens_as_plain_input():
    request = AnthropicCache().request(prompt(10, [9]))
    assert request == AnthropicRequest(read=0, written=0, written_1h=0, plain=1000)


@pytest.mark.parametrize(("later", "hit"), [(FIVE_MINUTES - 1, True), (FIVE_MINUTES, False)])
def test_an_entry_lives_five_minutes_after_it_was_written(later, hit):
    cache = AnthropicCache()
    cache.request(prompt(12, [11]))
    assert (cache.request(prompt(12, [11], time=later)).read > 0) is hit


def test_a_read_refreshes_the_lifetime_of_the_entry():
    refreshed = AnthropicCache()
    refreshed.request(prompt(12, [11]))
    refreshed.request(prompt(12, [11], time=200))
    assert refreshed.request(prompt(12, [11], time=450)).read == 1200
    not_refreshed = AnthropicCache()
    not_refreshed.request(prompt(12, [11]))
    assert not_refreshed.request(prompt(12, [11], time=450)).read == 0


def test_a_one_hour_entry_lives_an_hour_and_its_write_costs_2_0():
    cache = AnthropicCache()
    hour = Breakpoint(11, ONE_HOUR)
    first = cache.request(prompt(15, [hour]))
    assert first == AnthropicRequest(read=0, written=0, written_1h=1200, plain=300)
    assert cache.request(prompt(15, [hour], time=ONE_HOUR - 1)).read == 1200
    caches = PromptCaches()
    bill = caches.bill(prompt(15, [hour]))
    anthropic = PRICE_MODELS["anthropic"]
    assert request_cost(anthropic, bill) == pytest.approx(2.0 * 1200 + 1.0 * 300)


def test_reads_cost_0_1_writes_up_to_the_last_breakpoint_1_25_and_the_rest_1_0():
    caches = PromptCaches()
    caches.bill(prompt(12, [11]))
    bill = caches.bill(prompt(30, [11, 25], time=20))
    assert bill.anthropic == AnthropicRequest(read=1200, written=1400, written_1h=0, plain=400)
    anthropic = PRICE_MODELS["anthropic"]
    assert request_cost(anthropic, bill) == pytest.approx(0.1 * 1200 + 1.25 * 1400 + 1.0 * 400)


def test_more_than_four_breakpoints_is_counted_and_billed_as_plain_input():
    caches = PromptCaches()
    bill = SessionBill()
    bill.add(caches.bill(prompt(20, [3, 7, 11, 15, 19])))
    assert bill.per_request[0].anthropic == AnthropicRequest(0, 0, 0, 2000, over_limit=True)
    assert bill.over_limit == 1
    four = PromptCaches().bill(prompt(20, [7, 11, 15, 19]))
    assert not four.anthropic.over_limit and four.anthropic.written == 2000


def test_an_entry_is_of_one_model():
    cache = AnthropicCache()
    cache.request(prompt(12, [11], model="a"))
    assert cache.request(prompt(12, [11], time=10, model="b")).read == 0
    assert cache.request(prompt(12, [11], time=20, model="a")).read == 1200


# OpenAI's cache ------------------------------------------------------------------------


def test_openai_reads_nothing_under_1024_then_in_steps_of_128():
    assert [openai_cached(n) for n in (1023, 1024, 1151, 1152, 1279, 1280)] == [
        0, 1024, 1024, 1152, 1152, 1280]


def test_openai_reads_the_longest_prefix_of_any_earlier_live_request_token_by_token():
    cache = OpenAICache()
    first = blocks(15)  # 1,500 tokens
    cache.request(make_prompt("m", first, time=0))
    cache.request(make_prompt("m", blocks(15, tag="other"), time=10))
    # The third request shares 12 blocks and 50 tokens of the 13th with the first.
    changed = (b"changed", first[12][1][:50] + (-5,) * 50)
    third = make_prompt("m", [*first[:12], changed, *first[13:]], time=20)
    assert cache.shared(third) == 1250
    assert cache.request(third) == 1152


def test_openai_forgets_a_prefix_an_hour_after_the_last_request_that_held_it():
    cache = OpenAICache()
    cache.request(make_prompt("m", blocks(15), time=0))
    cache.request(make_prompt("m", blocks(15), time=3000))
    assert cache.request(make_prompt("m", blocks(15), time=6599)) == 1408
    assert cache.request(make_prompt("m", blocks(15), time=6599 + ONE_HOUR)) == 0


# Blocks, breakpoints and the client's requests -----------------------------------------


@pytest.fixture(scope="module")
def tokens() -> MessageTokens:
    return MessageTokens(load_encoder())


def test_a_breakpoint_is_no_content_a_string_is_one_text_block(tokens):
    plain = {"role": "user", "content": "Fix the bug in the parser."}
    marked = {"role": "user", "content": [{"type": "text", "text": "Fix the bug in the parser.",
                                           "cache_control": {"type": "ephemeral"}}]}
    assert tokens.item_blocks(plain) == tokens.item_blocks(marked)
    two = {"role": "user", "content": [{"type": "text", "text": "a"},
                                       {"type": "tool_result", "tool_use_id": "t", "content": "b",
                                        "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}
    unmarked = {"role": "user", "content": [{"type": "text", "text": "a"},
                                            {"type": "tool_result", "tool_use_id": "t",
                                             "content": "b"}]}
    assert len(tokens.item_blocks(two)) == 2
    assert tokens.item_blocks(two) == tokens.item_blocks(unmarked)


def test_a_moved_breakpoint_reads_what_the_earlier_one_wrote(tokens):
    """The entry is the content: a later request that carries its breakpoint
    on a later block reads what the earlier one wrote on its last block."""
    big = "word " * 3000
    items = [{"role": "user", "content": [{"type": "text", "text": big}]},
             {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
             {"role": "user", "content": [{"type": "text", "text": "more"}]}]
    session = Session("s", "input", items, fmt=ANTHROPIC, preamble="system")
    run = replay(session, MaskPolicy(enabled=False), tokens)
    first, second = run.bill.per_request
    assert first.anthropic.written > 3000 and first.anthropic.read == 0
    assert second.anthropic.read == first.anthropic.written


def test_claude_code_marks_its_two_system_blocks_and_the_last_block(tokens):
    items = [{"role": "user", "content": "Fix it."},
             {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]},
             {"role": "user", "content": "Go on."}]
    session = Session("s", "input", items, fmt=ANTHROPIC, preamble="Be careful.",
                      members={"model": "m", "tools": [{"name": "bash"}]})
    sent = ClientRequests(session).request(3)
    document = json.loads(sent.body)
    assert document["system"] == [
        {"type": "text", "text": CLAUDE_CODE_FIRST_BLOCK, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}}]
    assert document["messages"][-1]["content"] == [
        {"type": "text", "text": "Go on.", "cache_control": {"type": "ephemeral"}}]
    assert document["messages"][:2] == items[:2] and document["tools"] == [{"name": "bash"}]
    reading = PromptReader(ItemReadings(ANTHROPIC, tokens, items)).read(sent.request)
    # A tool, two system blocks, then one block per content block.
    assert [point.block for point in reading.breakpoints] == [1, 2, 5]


def test_a_chat_request_goes_as_it_is_and_caches_nothing_under_anthropic(tokens):
    items = [{"role": "user", "content": "word " * 3000},
             {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    session = Session("s", "input", items, fmt=CHAT)
    assert json.loads(ClientRequests(session).request(3).body) == {"messages": items}
    run = replay(session, MaskPolicy(enabled=False), tokens)
    assert run.bill.cached["anthropic"] == 0 and run.bill.cached["openai"] > 2500


def test_a_top_level_cache_control_is_a_breakpoint_on_the_last_block(tokens):
    request = Request({"cache_control": {"type": "ephemeral", "ttl": "1h"}, "system": "s"},
                      [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                    {"type": "text", "text": "b"}]}])
    reading = PromptReader(ItemReadings(ANTHROPIC, tokens, [])).read(request)
    assert reading.breakpoints == (Breakpoint(2, ONE_HOUR),)


def test_a_client_breakpoint_moved_or_removed_is_an_error_one_added_is_not():
    client = [Breakpoint(1), Breakpoint(2), Breakpoint(9)]
    added = breakpoint_errors(client, [*client, Breakpoint(5)])
    assert not added.over_limit and not added.client_moved_or_removed
    moved = breakpoint_errors(client, [Breakpoint(1), Breakpoint(2), Breakpoint(8)])
    assert moved.client_moved_or_removed
    longer = breakpoint_errors(client, [Breakpoint(1), Breakpoint(2), Breakpoint(9, ONE_HOUR)])
    assert longer.client_moved_or_removed
    five = breakpoint_errors(client, [*client, Breakpoint(4), Breakpoint(5)])
    assert five.over_limit and not five.client_moved_or_removed


def test_the_replay_bills_the_body_obsmask_forwards(tokens):
    """Masking off forwards the client's body; masking on forwards fewer
    tokens, and each policy counts its outcomes and no protocol error."""
    results = ["output line\n" * 400 for _ in range(4)]
    items: list[object] = [{"role": "user", "content": "Fix the bug."}]
    for number, result in enumerate(results):
        items.append({"role": "assistant", "content": [
            {"type": "text", "text": f"step {number}"},
            {"type": "tool_use", "id": f"t{number}", "name": "bash", "input": {"c": "ls"}}]})
        items.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{number}", "content": result}]})
    session = Session("s", "input", items, fmt=ANTHROPIC, preamble="system")
    runs = replay_policies(session, {"none": MaskPolicy(enabled=False),
                                     "window": MaskPolicy(window_turns=1)}, tokens)
    none, window = runs["none"], runs["window"]
    assert none.outcomes["unchanged"] == 5 and window.outcomes["masked"] > 0
    assert window.bill.input_tokens < none.bill.input_tokens
    assert window.masked_last_request == 3
    assert none.protocol_errors.total == window.protocol_errors.total == 0


@pytest.mark.parametrize(("remove_the_clients", "expected"), [
    (False, (2, 0)),  # two more marks: five breakpoints
    (True, (0, 2)),  # the client's last one taken away
])
def test_the_replay_counts_a_forwarded_body_that_breaks_the_breakpoint_rules(
        tokens, monkeypatch, remove_the_clients, expected):
    """A stand-in for obsmask that marks the first message's first two blocks
    (and, in the second case, drops the client's mark on the last block)."""
    items = [{"role": "user", "content": [{"type": "text", "text": "a"},
                                          {"type": "text", "text": "b"},
                                          {"type": "text", "text": "c"}]},
             {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
             {"role": "user", "content": [{"type": "text", "text": "d"}]}]

    def marking(body: bytes, masker: Masker, fmt: WireFormat,
                visit: object = None) -> RewriteOutcome:
        document = json.loads(body)
        messages = document["messages"]
        if remove_the_clients:
            messages[-1]["content"][-1].pop("cache_control")
        for block in messages[0]["content"][:2]:
            block["cache_control"] = {"type": "ephemeral"}
        plan = plan_masking(fmt.index(messages), masker.policy, messages)
        return Masked(json.dumps(document).encode(), plan, 0, 0)

    monkeypatch.setattr(replay_module, "forward", marking)
    session = Session("s", "input", items, fmt=ANTHROPIC, preamble="system")
    errors = replay(session, MaskPolicy(window_turns=1), tokens).protocol_errors
    assert (errors.over_four_breakpoints, errors.client_breakpoint_moved_or_removed) == expected
