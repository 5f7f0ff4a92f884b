"""The stub providers' prompt caches (tests/support/caching_provider.py), as
Anthropic and OpenAI document theirs: what a request reads and writes, the
usage it is told and its bill; then the stub servers that report them
(called in process, no socket).

Token counts here follow the stub's documented estimate: a prefix of ``i``
messages is ``chars // 4 + 3 * i`` tokens (``chars``: every string value of
those messages, keys and ``cache_control`` left out), after a preamble of
``chars(tools, system) // 4`` (Anthropic) or ``chars(instructions, tools) //
4`` (OpenAI)."""

from __future__ import annotations

import json

import pytest

from support.caching_provider import (
    ANTHROPIC_DEFAULT,
    OPENAI_DEFAULT,
    AnthropicPromptCache,
    InvalidRequest,
    OpenAIPromptCache,
    openai_cached_tokens,
)
from support.json_values import as_list, as_object
from support.recording_server import Recorded
from support.scripted_anthropic import ScriptedAnthropic
from support.scripted_chat import ScriptedChat, Step
from support.sse import sse_events

Json = dict[str, object]

MODEL = "claude-stub-1"
EPHEMERAL: Json = {"type": "ephemeral"}
HOUR: Json = {"type": "ephemeral", "ttl": "1h"}


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def text(chars: int, label: str = "a", cache_control: Json | None = None) -> Json:
    block: Json = {"type": "text", "text": (label * chars)[:chars]}
    if cache_control is not None:
        block["cache_control"] = cache_control
    return block


def user(*blocks: Json) -> Json:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: Json) -> Json:
    return {"role": "assistant", "content": list(blocks)}


def body(*messages: Json, **members: object) -> Json:
    return {"model": MODEL, "max_tokens": 1024, "messages": list(messages), **members}


def tokens(*messages: Json) -> int:
    """The documented estimate, by hand: ``type`` and ``role`` are strings
    too; cache_control is not counted."""
    chars = 0
    for message in messages:
        chars += len(str(message["role"]))
        for block in as_list(message["content"]):
            block = as_object(block)
            chars += sum(len(v) for k, v in block.items()
                         if isinstance(v, str) and k != "cache_control")
    return chars // 4 + 3 * len(messages)


# Tokens ------------------------------------------------------------------------------


def test_a_prompt_is_its_string_characters_over_four_plus_three_tokens_a_message():
    """Keys are not counted, nor ``cache_control``; the preamble is
    ``chars(tools, system) // 4``."""
    cache = AnthropicPromptCache()
    first = user(text(401, cache_control=EPHEMERAL))  # 4 + 4 + 401 = 409 characters
    second = assistant(text(95))  # 9 + 4 + 95 = 108 characters
    tools = [{"name": "Bash", "input_schema": {"type": "object"}}]  # 4 + 6 = 10
    bill = cache.bill(body(first, second, system="s" * 30, tools=tools))
    assert bill.total_tokens == (409 + 108) // 4 + 3 * 2 + (10 + 30) // 4 == 145
    assert tokens(first, second) == 135


# Anthropic: reads and writes ---------------------------------------------------------


def test_the_second_request_reads_what_the_first_wrote_at_its_breakpoint():
    """The first request writes its whole prompt (breakpoint on its last
    block); the second, two messages longer, reads it and writes the rest."""
    cache = AnthropicPromptCache()
    first = user(text(6000, cache_control=EPHEMERAL))
    one = cache.bill(body(first))
    assert (one.cache_read_input_tokens, one.cache_creation_input_tokens, one.input_tokens) == (
        0, tokens(first), 0)
    assert one.read is None and [w.message for w in one.written] == [0]

    reply, again = assistant(text(300)), user(text(5000, "b", cache_control=EPHEMERAL))
    two = cache.bill(body(user(text(6000)), reply, again))
    assert two.read is not None and (two.read.message, two.read.position) == (0, 0)
    assert two.cache_read_input_tokens == one.total_tokens == tokens(first)
    assert two.cache_creation_input_tokens == tokens(first, reply, again) - tokens(first)
    assert two.input_tokens == 0
    assert [w.message for w in two.written] == [2]


def test_what_follows_the_last_breakpoint_is_plain_input():
    cache = AnthropicPromptCache()
    first = user(text(6000, cache_control=EPHEMERAL))
    tail = assistant(text(800))
    bill = cache.bill(body(first, tail))
    assert bill.cache_creation_input_tokens == tokens(first)
    assert bill.input_tokens == tokens(first, tail) - tokens(first)


def _lookback_request(blocks_after: int) -> Json:
    """The first message (the cached one, block 0), then an assistant
    message of ``blocks_after`` text blocks, the breakpoint on the last."""
    after = [text(10, "b") for _ in range(blocks_after)]
    after[-1] = text(10, "b", cache_control=EPHEMERAL)
    return body(user(text(6000)), assistant(*after))


def test_an_entry_twenty_blocks_back_from_a_breakpoint_is_read():
    """Breakpoint on block 19, entry after block 0: the 20th boundary the
    lookback checks (19, 18, ..., 0)."""
    cache = AnthropicPromptCache()
    cache.bill(body(user(text(6000, cache_control=EPHEMERAL))))
    bill = cache.bill(_lookback_request(19))
    assert bill.breakpoints[0].block == 19
    assert bill.read is not None and bill.read.block == 0
    assert bill.cache_read_input_tokens == tokens(user(text(6000)))


def test_an_entry_further_back_than_twenty_blocks_is_not_read():
    """Breakpoint on block 20: the lookback stops at block 1, one short of
    the entry; everything is written anew."""
    cache = AnthropicPromptCache()
    cache.bill(body(user(text(6000, cache_control=EPHEMERAL))))
    bill = cache.bill(_lookback_request(20))
    assert bill.breakpoints[0].block == 20
    assert bill.read is None and bill.cache_read_input_tokens == 0
    assert bill.cache_creation_input_tokens == bill.total_tokens


def test_a_second_breakpoint_within_twenty_blocks_of_the_entry_finds_it():
    """The lookback runs from every breakpoint: a far one misses, a near one
    (on the first message itself) hits."""
    cache = AnthropicPromptCache()
    cache.bill(body(user(text(6000, cache_control=EPHEMERAL))))
    request = _lookback_request(30)
    first = as_object(as_list(as_object(as_list(request["messages"])[0])["content"])[0])
    first["cache_control"] = dict(EPHEMERAL)
    bill = cache.bill(request)
    assert bill.read is not None and bill.read.block == 0


def test_moving_a_breakpoint_keeps_the_entry():
    """The entry was written with the breakpoint on the first message; the
    next request has none there and one two messages later, with another
    cache_control object: the prefix's content is the same, it is read."""
    cache = AnthropicPromptCache()
    cache.bill(body(user(text(6000, cache_control=EPHEMERAL)), assistant(text(40))))
    moved = body(user(text(6000)), assistant(text(40)),
                 user(text(30, cache_control={"type": "ephemeral", "ttl": "5m"})))
    bill = cache.bill(moved)
    assert bill.read is not None and bill.read.message == 0
    assert bill.cache_read_input_tokens == tokens(user(text(6000)))


def test_a_changed_prefix_is_not_read():
    cache = AnthropicPromptCache()
    cache.bill(body(user(text(6000, cache_control=EPHEMERAL))))
    bill = cache.bill(body(user(text(6000, "z", cache_control=EPHEMERAL))))
    assert bill.read is None and bill.cache_creation_input_tokens == bill.total_tokens


def test_an_entry_is_read_only_by_the_same_model():
    cache = AnthropicPromptCache()
    cache.bill(body(user(text(6000, cache_control=EPHEMERAL))))
    other = cache.bill({**body(user(text(6000, cache_control=EPHEMERAL))), "model": "other"})
    assert other.read is None
    same = cache.bill(body(user(text(6000, cache_control=EPHEMERAL))))
    assert same.read is not None


def test_nothing_is_written_under_the_minimum_and_the_minimum_can_be_set():
    small = body(user(text(3000, cache_control=EPHEMERAL)))  # 3008 // 4 + 3 = 755 tokens
    cache = AnthropicPromptCache()
    for _ in range(2):
        bill = cache.bill(small)
        assert bill.total_tokens == 755
        assert (bill.cache_read_input_tokens, bill.cache_creation_input_tokens,
                bill.input_tokens) == (0, 0, 755)
        assert bill.written == ()
    lower = AnthropicPromptCache(minimum_tokens=755)
    assert lower.bill(small).cache_creation_input_tokens == 755
    assert lower.bill(small).cache_read_input_tokens == 755


def test_a_breakpoint_inside_a_message_bills_through_the_whole_message():
    """The documented simplification: the entry is at the block, the tokens
    counted are those of the whole message."""
    cache = AnthropicPromptCache()
    message = user(text(6000, cache_control=EPHEMERAL), text(2000, "b"))
    bill = cache.bill(body(message))
    assert bill.written[0].position == 0
    assert bill.cache_creation_input_tokens == tokens(message) == bill.total_tokens


# Anthropic: lifetimes ----------------------------------------------------------------


@pytest.mark.parametrize(("after", "read"), [(299.9, True), (300.0, False)])
def test_an_entry_lives_five_minutes_after_it_was_written(after: float, read: bool):
    clock = Clock()
    cache = AnthropicPromptCache(clock=clock)
    request = body(user(text(6000, cache_control=EPHEMERAL)))
    cache.bill(request)
    clock.now += after
    bill = cache.bill(request)
    assert (bill.read is not None) == read
    assert bill.cache_creation_input_tokens == (0 if read else bill.total_tokens)


def test_each_read_gives_an_entry_five_more_minutes():
    """Read by a request whose own breakpoint is further on (so that only
    the read can refresh it), the entry lives past its first 5 minutes."""
    clock = Clock()
    cache = AnthropicPromptCache(clock=clock)
    cache.bill(body(user(text(6000, cache_control=EPHEMERAL))))
    for step in range(3):
        clock.now += 240
        later = body(user(text(6000)), assistant(text(20, str(step), cache_control=EPHEMERAL)))
        bill = cache.bill(later)
        assert bill.read is not None and bill.read.block == 0, f"read {step}"
    clock.now += 300
    assert cache.bill(later).read is None


def test_a_one_hour_breakpoint_keeps_its_entry_an_hour_and_writes_at_twice_the_price():
    clock = Clock()
    cache = AnthropicPromptCache(clock=clock)
    request = body(user(text(6000, cache_control=HOUR)))
    written = cache.bill(request)
    assert (written.cache_creation_1h_tokens, written.cache_creation_5m_tokens) == (
        tokens(user(text(6000))), 0)
    assert written.units == pytest.approx(2.0 * written.total_tokens)
    usage = written.usage(10)
    assert usage["cache_creation"] == {"ephemeral_5m_input_tokens": 0,
                                       "ephemeral_1h_input_tokens": written.total_tokens}
    clock.now += 3599
    assert cache.bill(request).read is not None
    clock.now += 3600
    assert cache.bill(request).read is None


def test_an_entry_written_for_five_minutes_is_gone_after_five_minutes_not_an_hour():
    clock = Clock()
    cache = AnthropicPromptCache(clock=clock)
    cache.bill(body(user(text(6000, cache_control=EPHEMERAL))))
    clock.now += 301
    assert cache.bill(body(user(text(6000, cache_control=HOUR)))).read is None


# Anthropic: the bill -----------------------------------------------------------------


def test_the_bill_prices_reads_at_a_tenth_writes_at_five_quarters_and_the_rest_at_one():
    cache = AnthropicPromptCache()
    first = user(text(6000, cache_control=EPHEMERAL))
    cache.bill(body(first))
    reply, again, tail = assistant(text(300)), user(text(5000, "b", cache_control=EPHEMERAL)), \
        assistant(text(400))
    bill = cache.bill(body(user(text(6000)), reply, again, tail))
    read = tokens(first)
    write = tokens(first, reply, again) - read
    plain = tokens(first, reply, again, tail) - read - write
    assert (bill.cache_read_input_tokens, bill.cache_creation_5m_tokens, bill.input_tokens) == (
        read, write, plain)
    assert plain > 0
    assert bill.units == pytest.approx(0.1 * read + 1.25 * write + plain)
    assert cache.total_units() == pytest.approx(1.25 * read + bill.units)


def test_a_write_is_priced_by_the_lifetime_of_the_breakpoint_that_ends_each_part():
    """1h on the system prompt, 5m on the last message: the system part is
    written at 2.0, the messages at 1.25."""
    cache = AnthropicPromptCache()
    system = [text(4400, "s", cache_control=HOUR)]  # 4 + 4400 = 4404 // 4 = 1101 tokens
    message = user(text(6000, cache_control=EPHEMERAL))
    bill = cache.bill(body(message, system=system))
    assert bill.cache_creation_1h_tokens == 1101
    assert bill.cache_creation_5m_tokens == tokens(message)
    assert bill.units == pytest.approx(2.0 * 1101 + 1.25 * tokens(message))


def test_the_bill_records_each_breakpoint_where_it_sits():
    """A tool, a system block, a text block nested in a tool_result, and the
    automatic one of a top-level cache_control on the last block."""
    cache = AnthropicPromptCache()
    tools = [{"name": "a", "input_schema": {}},
             {"name": "b", "input_schema": {}, "cache_control": EPHEMERAL}]
    result = {"type": "tool_result", "tool_use_id": "t1",
              "content": [text(10), text(10, cache_control=HOUR)]}
    messages = [user(text(10)),
                assistant({"type": "tool_use", "id": "t1", "name": "a", "input": {}}),
                user(result, text(10))]
    bill = cache.bill(body(*messages, tools=tools, system=[text(5, cache_control=EPHEMERAL)],
                           cache_control=EPHEMERAL))
    found = [(b.block, b.part, b.message, b.position, b.path, b.cache_control, b.automatic)
             for b in bill.breakpoints]
    assert found == [
        (1, "tools", None, 1, ("tools", 1), EPHEMERAL, False),
        (2, "system", None, 0, ("system", 0), EPHEMERAL, False),
        (5, "messages", 2, 0, ("messages", 2, "content", 0, "content", 1), HOUR, False),
        (6, "messages", 2, 1, (), EPHEMERAL, True),
    ]


# Anthropic: refused requests ---------------------------------------------------------


def test_four_breakpoints_are_served_and_a_fifth_is_refused_with_the_apis_error():
    cache = AnthropicPromptCache()
    four = body(user(*[text(10, cache_control=EPHEMERAL) for _ in range(4)]))
    assert len(cache.bill(four).breakpoints) == 4
    five = body(user(*[text(10, cache_control=EPHEMERAL) for _ in range(5)]))
    with pytest.raises(InvalidRequest) as refused:
        cache.bill(five)
    assert refused.value.body() == {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "A maximum of 4 blocks with cache_control may be provided. Found 5."}}
    assert len(cache.bills) == 1


def test_a_top_level_cache_control_counts_as_a_breakpoint_unless_the_last_block_has_one():
    cache = AnthropicPromptCache()
    marked_last = body(user(*[text(10, cache_control=EPHEMERAL) for _ in range(4)]),
                       cache_control=EPHEMERAL)
    assert [b.automatic for b in cache.bill(marked_last).breakpoints] == [False] * 4
    blocks = [text(10, cache_control=EPHEMERAL) for _ in range(4)] + [text(10)]
    with pytest.raises(InvalidRequest, match="Found 5"):
        cache.bill(body(user(*blocks), cache_control=EPHEMERAL))


def test_a_cache_control_on_a_thinking_block_is_refused():
    cache = AnthropicPromptCache()
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig",
                "cache_control": EPHEMERAL}
    with pytest.raises(InvalidRequest, match=r"messages\.1\.content\.0\.thinking\.cache_control"):
        cache.bill(body(user(text(10)), assistant(thinking, text(5))))


# OpenAI --------------------------------------------------------------------------------


def chat(*sizes: int, model: str = "gpt-stub") -> Json:
    """A Chat Completions body: one user message of each size (in characters
    of content; 4 more for the role)."""
    messages = [{"role": "user", "content": "c" * size} for size in sizes]
    return {"model": model, "messages": messages}


def chat_tokens(*sizes: int) -> int:
    return sum(size + 4 for size in sizes) // 4 + 3 * len(sizes)


@pytest.mark.parametrize(("shared", "cached"), [
    (0, 0), (1023, 0), (1024, 1024), (1151, 1024), (1152, 1152), (1300, 1280), (5000, 4992),
])
def test_openai_caches_nothing_under_1024_tokens_then_steps_of_128(shared: int, cached: int):
    assert openai_cached_tokens(shared) == cached


def test_openai_reports_the_prefix_shared_with_an_earlier_request_in_128_token_steps():
    cache = OpenAIPromptCache("messages")
    first = cache.bill(chat(5000, 200))
    assert (first.prompt_tokens, first.cached_tokens) == (chat_tokens(5000, 200), 0)
    second = cache.bill(chat(5000, 200, 300))
    shared = chat_tokens(5000, 200)
    assert shared == 1308
    assert (second.shared_items, second.shared_tokens, second.cached_tokens) == (2, shared, 1280)
    usage = second.chat_usage(7)
    assert usage["prompt_tokens"] == chat_tokens(5000, 200, 300)
    assert usage["prompt_tokens_details"] == {"cached_tokens": 1280, "audio_tokens": 0}


def test_openai_shares_whole_messages_only():
    """A last message that changes is not shared, even in part."""
    cache = OpenAIPromptCache("messages")
    cache.bill(chat(5000, 6000))
    changed = chat(5000, 6000)
    as_object(as_list(changed["messages"])[1])["content"] = "c" * 5999 + "d"
    bill = cache.bill(changed)
    assert bill.shared_items == 1 and bill.shared_tokens == chat_tokens(5000)


def test_openai_shares_nothing_with_another_model_or_other_tools():
    cache = OpenAIPromptCache("messages")
    cache.bill(chat(5000, 200))
    assert cache.bill(chat(5000, 200, model="other")).cached_tokens == 0
    tools = [{"type": "function", "function": {"name": "bash"}}]
    assert cache.bill({**chat(5000, 200), "tools": tools}).shared_items is None


def test_responses_count_instructions_and_tools_before_the_input_items():
    cache = OpenAIPromptCache("input")
    items = [{"role": "user", "content": "c" * 5000},
             {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{}"}]
    request: Json = {"model": "gpt-stub", "instructions": "i" * 400, "input": items,
                     "tools": [{"type": "function", "name": "bash"}]}
    first = cache.bill(request)
    preamble = (400 + 8 + 4) // 4
    assert first.prompt_tokens == preamble + (4 + 5000 + 13 + 6 + 4 + 2) // 4 + 6 == 1366
    second = cache.bill({**request, "input": [*items, {"type": "function_call_output",
                                                         "call_id": "call_1", "output": "ok"}]})
    assert second.shared_tokens == 1366 and second.cached_tokens == 1280
    assert second.responses_usage(3)["input_tokens_details"] == {"cached_tokens": 1280}


# Prices and rules per model --------------------------------------------------------


@pytest.mark.parametrize(("model", "terms"), [
    ("claude-fable-5-1", (0.025, 1.25, 2.0, 512)),
    ("claude-mythos-5-1-20261101", (0.025, 1.25, 2.0, 512)),
    ("claude-opus-5-5", (0.05, 1.25, 2.0, 512)),
    ("claude-opus-5", (0.1, 1.25, 2.0, 512)),
    ("claude-sonnet-4-5", (0.1, 1.25, 2.0, 1024)),
    ("claude-opus-4-7", (0.1, 1.25, 2.0, 2048)),
    ("claude-haiku-4-5", (0.1, 1.25, 2.0, 4096)),
    (MODEL, (0.1, 1.25, 2.0, 1024)),  # made up: the stub's terms from before its table
])
def test_the_anthropic_stub_bills_each_model_by_its_own_row(
        model: str, terms: tuple[float, float, float, int]):
    cache = AnthropicPromptCache()
    found = cache.terms(model)
    assert (found.read, found.write, found.write_1h, found.minimum) == terms
    assert cache.terms("claude-stub-1") is ANTHROPIC_DEFAULT


def test_fable_writes_from_512_tokens_and_reads_at_a_fortieth():
    """A 755-token prompt: under the default minimum nothing is written; to
    claude-fable-5-1 it is written, then read at 0.025."""
    small = user(text(3000, cache_control=EPHEMERAL))
    cache = AnthropicPromptCache()
    assert cache.bill(body(small)).cache_creation_input_tokens == 0
    fable = {**body(small), "model": "claude-fable-5-1"}
    first = cache.bill(fable)
    assert (first.cache_creation_input_tokens, first.units) == (755, pytest.approx(1.25 * 755))
    second = cache.bill(fable)
    assert (second.cache_read_input_tokens, second.units) == (755, pytest.approx(0.025 * 755))


def test_openai_models_before_gpt_5_6_keep_free_writes_and_steps():
    cache = OpenAIPromptCache("messages")
    for model in ("gpt-5.2", "gpt-4o-2024-08-06", "stub-model"):
        cache.bill(chat(5000, 200, model=model))
        bill = cache.bill(chat(5000, 200, 300, model=model))
        assert (bill.cached_tokens, bill.cache_write_tokens) == (1280, 0), model
        assert "cache_write_tokens" not in as_object(bill.chat_usage(1)["prompt_tokens_details"])
    assert cache.terms("stub-model") is OPENAI_DEFAULT
    assert cache.terms("gpt-4o").read == 0.5


def test_gpt_5_6_writes_through_its_latest_message_and_reads_whole_entries_without_steps():
    """The implicit breakpoint closes the latest user or tool message: the
    first request writes all of it (reported, billed 1.25); the next reads
    it whole (no 128-token step) and writes what it adds; a request whose
    second message changed reads no earlier entry (none ends before the
    change: entries sit at breakpoints only), and one ending with an
    assistant message writes only through its latest user message."""
    cache = OpenAIPromptCache("messages")
    first = cache.bill(chat(5000, 200, model="gpt-5.6"))
    whole = chat_tokens(5000, 200)
    assert (first.cached_tokens, first.cache_write_tokens) == (0, whole)
    assert first.units() == pytest.approx(1.25 * whole)
    second = cache.bill(chat(5000, 200, 300, model="gpt-5.6"))
    assert (second.cached_tokens, second.cache_write_tokens) == (
        whole, chat_tokens(5000, 200, 300) - whole)
    assert second.chat_usage(1)["prompt_tokens_details"] == {
        "cached_tokens": whole, "cache_write_tokens": second.cache_write_tokens,
        "audio_tokens": 0}
    assert second.responses_usage(1)["input_tokens_details"] == {
        "cached_tokens": whole, "cache_write_tokens": second.cache_write_tokens}
    changed = chat(5000, 201, 300, model="gpt-5.6")
    assert cache.bill(changed).cached_tokens == 0
    trailing = chat(5000, 200, 300, 40, model="gpt-5.6")
    as_object(as_list(trailing["messages"])[3])["role"] = "assistant"
    bill = cache.bill(trailing)
    assert (bill.cached_tokens, bill.cache_write_tokens) == (chat_tokens(5000, 200, 300), 0)
    assert bill.units() == pytest.approx(0.1 * bill.cached_tokens
                                         + bill.prompt_tokens - bill.cached_tokens)


def test_gpt_5_6_writes_nothing_under_its_minimum():
    cache = OpenAIPromptCache("messages")
    small = chat(3000, model="gpt-5.6")
    for _ in range(2):
        bill = cache.bill(small)
        assert (bill.cached_tokens, bill.cache_write_tokens) == (0, 0)
        assert bill.units() == bill.prompt_tokens


# The stub servers with a cache --------------------------------------------------------


def _post(path: str, request: Json) -> Recorded:
    return Recorded("POST", path, {"content-type": "application/json"},
                    json.dumps(request).encode())


def _shell_request(*messages: Json, stream: bool = False) -> Json:
    tools = [{"name": "Bash", "input_schema": {"type": "object", "required": ["command"],
                                               "properties": {"command": {"type": "string"}}}}]
    return {**body(*messages, tools=tools), "stream": stream}


def _stream_usages(raw: bytes) -> dict[str, object]:
    out: dict[str, object] = {}
    for kind, data, _ in sse_events(raw):
        event = as_object(json.loads(data))
        if kind == "message_start":
            out[kind] = as_object(event["message"])["usage"]
        elif kind == "message_delta":
            out[kind] = event["usage"]
    return out


def test_the_scripted_anthropic_server_reports_its_caches_usage_in_json_and_in_its_stream():
    cache = AnthropicPromptCache()
    server = ScriptedAnthropic("MARK", ["emit 1"], "done", cache=cache)
    first = user(text(6000, "MARK", cache_control=EPHEMERAL))
    answer = server(_post("/v1/messages", _shell_request(first)))
    assert answer.status == 200 and isinstance(answer.body, bytes)
    reported = as_object(json.loads(answer.body))["usage"]
    assert reported == cache.bills[0].usage(25)
    assert server.served[0].bill == cache.bills[0]

    second = _shell_request(user(text(6000, "MARK")), assistant(text(20)),
                            user(text(20, cache_control=EPHEMERAL)), stream=True)
    streamed = server(_post("/v1/messages", second))
    assert isinstance(streamed.body, list)
    usages = _stream_usages(b"".join(c for c in streamed.body if isinstance(c, bytes)))
    bill = cache.bills[1]
    assert bill.cache_read_input_tokens == cache.bills[0].total_tokens
    assert usages["message_start"] == {**bill.usage(25), "output_tokens": 1}
    assert usages["message_delta"] == bill.usage(25)


def test_the_scripted_anthropic_server_answers_400_to_a_fifth_breakpoint():
    server = ScriptedAnthropic("MARK", [], "done", cache=AnthropicPromptCache())
    five = _shell_request(user(*[text(10, "MARK", cache_control=EPHEMERAL) for _ in range(5)]))
    answer = server(_post("/v1/messages", five))
    assert answer.status == 400 and isinstance(answer.body, bytes)
    error = as_object(as_object(json.loads(answer.body))["error"])
    assert error["type"] == "invalid_request_error" and "Found 5." in str(error["message"])
    assert [s.kind for s in server.served] == ["invalid"]


def test_the_scripted_anthropic_server_without_a_cache_keeps_its_rough_usage():
    server = ScriptedAnthropic("MARK", [], "done")
    five = _shell_request(user(*[text(10, "MARK", cache_control=EPHEMERAL) for _ in range(5)]))
    answer = server(_post("/v1/messages", five))
    assert answer.status == 200 and server.served[0].bill is None
    assert "cache_creation" not in as_object(server.served[0].usage)


def test_the_scripted_chat_server_reports_its_caches_cached_tokens():
    cache = OpenAIPromptCache("messages")
    server = ScriptedChat([Step("think", "ls")], cache=cache)
    server(_post("/v1/chat/completions", chat(5000, 200)))
    answer = server(_post("/v1/chat/completions", chat(5000, 200, 300)))
    assert isinstance(answer.body, bytes)
    usage = as_object(as_object(json.loads(answer.body))["usage"])
    assert usage == cache.bills[1].chat_usage(23)
    assert as_object(usage["prompt_tokens_details"])["cached_tokens"] == 1280
    assert [s.bill for s in server.sent] == cache.bills
