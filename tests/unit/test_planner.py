"""The planner's rules (``conversation/planning/planner.py``), run against all three
wire formats.

The same policy, with the same invariants, works on all three through one model
of tool turns and tool results. Each case is written once as a list of events
(support/formats.py) and checked in OpenAI Chat Completions, Anthropic Messages
and OpenAI Responses form."""

from __future__ import annotations

import copy
import json

import pytest

from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.planning.plan import CLIPPED, MASKED
from obsmask_core.conversation.planning.planner import plan_masking
from obsmask_core.conversation.settings.policy import (
    DEFAULT_PLACEHOLDER_TEMPLATE,
    MaskPolicy,
    render_placeholder,
)
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES
from obsmask_core.shared.truncation import TRUNCATION_MARK, truncate_text
from support.chat import LONG_OUTPUT
from support.formats import (
    FORMAT_IDS,
    FORMATS,
    Call,
    Event,
    Result,
    Say,
    Turn,
    changed_results,
    convert,
    result_values,
    session,
    skeleton,
)
from support.planning import DISPATCH, masked_ids, plan_of

all_formats = pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)

TRACEBACK = (
    "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
    + " " * 4 + "y" * 200 + "\nValueError: boom\n"
)


def masked(fmt, events: list[Event], **policy: object) -> list[object]:
    before = convert(fmt, events)
    snapshot = copy.deepcopy(before)
    after = mask_items(before, MaskPolicy(**policy), fmt)
    assert before == snapshot, "the input must not be modified"
    return changed_results(fmt, before, after)


@all_formats
def test_masking_changes_nothing_but_the_results_values(fmt):
    """Masking keeps the item count, the order, every id and every call; only
    the results' values change."""
    before = convert(fmt, session(turns=5, calls_per_turn=2))
    after = mask_items(before, MaskPolicy(window_turns=2), fmt)
    assert changed_results(fmt, before, after)
    assert len(after) == len(before)
    assert skeleton(fmt, after) == skeleton(fmt, before)


@all_formats
@pytest.mark.parametrize("window", [1, 3, 6])
def test_only_results_older_than_the_window_are_masked(fmt, window):
    """With more tool turns than the window, only the results of the turns
    older than the window are masked."""
    assert masked(fmt, session(turns=6), window_turns=window) == [
        f"call_{t}_0" for t in range(6 - window)
    ]


@all_formats
def test_parallel_calls_are_one_turn(fmt):
    """Several calls in one model turn are one tool turn: all their results are
    inside the window or all outside."""
    assert masked(fmt, session(turns=4, calls_per_turn=3), window_turns=2) == [
        f"call_{t}_{n}" for t in range(2) for n in range(3)
    ]


@all_formats
def test_placeholder_names_the_tool_of_the_matching_call(fmt):
    """The tool name in the placeholder comes from the matching call, in every
    format."""
    events = [Say("user", "go"), Turn([Call("a", "read_file"), Call("b", "grep")]),
              Result("b", LONG_OUTPUT), Result("a", LONG_OUTPUT + "!"), *session(2)[1:]]
    before = convert(fmt, events)
    after = mask_items(before, MaskPolicy(window_turns=1), fmt)
    values = dict(result_values(fmt, after))
    for call_id, name, size in (("a", "read_file", len(LONG_OUTPUT) + 1),
                                ("b", "grep", len(LONG_OUTPUT))):
        expected = render_placeholder(DEFAULT_PLACEHOLDER_TEMPLATE, call_id, name, size)
        assert values[call_id] == expected


@all_formats
def test_unknown_tool_name_is_inconnu(fmt):
    events = [Say("user", "go"), Turn([Call("a", None)]), Result("a", LONG_OUTPUT),
              *session(1)[1:]]
    after = mask_items(convert(fmt, events), MaskPolicy(window_turns=1), fmt)
    assert "outil=inconnu" in str(dict(result_values(fmt, after))["a"])


@all_formats
@pytest.mark.parametrize("content", [
    TRACEBACK,
    json.dumps({"error": {"message": "rate limited"}, "pad": "x" * 300}),
    json.dumps({"status": "error", "pad": "x" * 300}),
])
def test_errors_are_kept(fmt, content):
    """A result that reads as an error (a traceback, JSON with a non-empty
    "error" or "status": "error") is not masked."""
    events = session(turns=3)
    events[2] = Result("call_0_0", content)
    assert masked(fmt, events, window_turns=1) == ["call_1_0"]


@all_formats
def test_a_command_that_failed_by_its_exit_code_is_kept_only_with_keep_errors(fmt):
    """A shell result whose header says the process exited with a code other
    than 0 is kept as an error while keep_errors is on, and masked like any
    other old result when it is off."""
    failed = ("Chunk ID: 4f2a1c\nWall time: 0.0512 seconds\nProcess exited with code 1\n"
              "Original token count: 12\nOutput:\n"
              + "cat: missing_file.txt: No such file or directory\n" * 10)
    events = session(turns=3)
    events[2] = Result("call_0_0", failed)
    assert plan_of(events, fmt, window_turns=1).kept["error"] == 1
    assert masked(fmt, events, window_turns=1) == ["call_1_0"]
    assert plan_of(events, fmt, window_turns=1, keep_errors=False).kept["error"] == 0
    assert masked(fmt, events, window_turns=1, keep_errors=False) == ["call_0_0", "call_1_0"]


@all_formats
def test_mentions_of_error_are_masked(fmt):
    """A file that merely mentions errors is not an error: it is masked like
    any other result."""
    events = session(turns=3)
    events[2] = Result("call_0_0", "class ParseError(Exception):\n    pass\n" * 20)
    assert masked(fmt, events, window_turns=1) == ["call_0_0", "call_1_0"]


@all_formats
def test_orphans_are_not_masked(fmt):
    """A result whose id no call declared is not masked; neither is a result
    that comes before the turn that calls its id (it is an orphan too)."""
    events = session(turns=3)
    events.insert(1, Result("call_2_0", LONG_OUTPUT))
    events.insert(1, Result("nowhere", LONG_OUTPUT))
    before = convert(fmt, events)
    after = mask_items(before, MaskPolicy(window_turns=1), fmt)
    assert changed_results(fmt, before, after) == ["call_0_0", "call_1_0"]


@all_formats
@pytest.mark.parametrize("call_id", ["", None, 17])
def test_missing_or_empty_ids_are_not_masked(fmt, call_id):
    """A result whose id is missing, empty or not a string is not masked."""
    events = session(turns=3)
    events.insert(3, Result(call_id, LONG_OUTPUT))
    assert masked(fmt, events, window_turns=1) == ["call_0_0", "call_1_0"]


@all_formats
def test_values_without_text_are_not_masked(fmt):
    """A value that holds no text (null, a number, only images) is left as it
    is."""
    events = session(turns=4)
    events[2] = Result("call_0_0", None)
    events[4] = Result("call_1_0", 42)
    events[6] = Result("call_2_0", [{"type": "image", "source": {"data": "AAAA"}}])
    assert masked(fmt, events, window_turns=1) == []


@all_formats
def test_short_results_stay(fmt):
    """A result is never replaced by a placeholder that is not shorter than
    it."""
    events = session(turns=3)
    events[2] = Result("call_0_0", "ok")
    assert masked(fmt, events, window_turns=1) == ["call_1_0"]


@all_formats
def test_the_last_k_results_of_each_tool_stay(fmt):
    """keep_last_k_per_tool keeps the K most recent results of each tool, even
    outside the window."""
    names = ["read_file", "bash", "bash", "read_file", "bash"]
    events: list[Event] = [Say("user", "go")]
    for turn, name in enumerate(names):
        events += [Turn([Call(f"c{turn}", name)]), Result(f"c{turn}", LONG_OUTPUT)]
    assert masked(fmt, events, window_turns=1, keep_last_k_per_tool=1) == ["c0", "c1", "c2"]


@all_formats
@pytest.mark.parametrize("policy", [{"enabled": False}, {"window_turns": 0}])
def test_off_changes_nothing(fmt, policy):
    assert masked(fmt, session(turns=5), **policy) == []


@all_formats
def test_masking_its_own_output_changes_nothing(fmt):
    """Masking its own output changes nothing."""
    policy = MaskPolicy(window_turns=2)
    once = mask_items(convert(fmt, session(turns=5)), policy, fmt)
    assert mask_items(once, policy, fmt) == once
    plan = plan_masking(fmt.index(once), policy, once)
    assert plan.masked == 0 and plan.kept["already_masked"] == 3


@all_formats
def test_reused_ids_follow_the_latest_earlier_turn(fmt):
    events: list[Event] = [Say("user", "go")]
    for _ in range(4):
        events += [Turn([Call("call_0")]), Result("call_0", LONG_OUTPUT)]
    before = convert(fmt, events)
    after = mask_items(before, MaskPolicy(window_turns=1), fmt)
    pairs = zip(result_values(fmt, before), result_values(fmt, after), strict=True)
    assert [old == new for (_, old), (_, new) in pairs] == [False, False, False, True]


# What is specific to one format --------------------------------------------------------


def only(*formats):
    return pytest.mark.parametrize("fmt", formats, ids=[f.name for f in formats])


@only(ANTHROPIC)
def test_anthropic_is_error_is_an_error_before_any_heuristic(fmt):
    """An Anthropic result flagged ``is_error: true`` is an error for
    keep_errors, whatever its text says."""
    events = session(turns=3)
    events[2] = Result("call_0_0", LONG_OUTPUT, is_error=True)
    assert masked(fmt, events, window_turns=1) == ["call_1_0"]
    assert masked(fmt, events, window_turns=1, keep_errors=False) == ["call_0_0", "call_1_0"]


IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}


@only(ANTHROPIC, RESPONSES)
def test_list_of_blocks_keeps_images_and_merges_text(fmt):
    """In a list of blocks the text blocks become one text block holding the
    placeholder, at the first one's place; image blocks stay where they
    were."""
    text_type = "text" if fmt is ANTHROPIC else "input_text"
    content = [{"type": text_type, "text": LONG_OUTPUT}, IMAGE,
               {"type": text_type, "text": "more " * 50}]
    events = session(turns=2)
    events[2] = Result("call_0_0", content)
    after = mask_items(convert(fmt, events), MaskPolicy(window_turns=1), fmt)
    value = dict(result_values(fmt, after))["call_0_0"]
    size = len(LONG_OUTPUT) + 1 + len("more " * 50)
    assert value == [
        {"type": text_type,
         "text": render_placeholder(DEFAULT_PLACEHOLDER_TEMPLATE, "call_0_0", "bash", size)},
        IMAGE,
    ]


@only(ANTHROPIC)
def test_anthropic_cache_control_is_never_moved(fmt):
    """A cache breakpoint on the first text block stays with it; a result
    whose other text blocks carry one is not masked (that would move it)."""
    first = {"type": "text", "text": LONG_OUTPUT, "cache_control": {"type": "ephemeral"}}
    events = session(turns=3)
    events[2] = Result("call_0_0", [first, {"type": "text", "text": "tail " * 40}])
    events[4] = Result("call_1_0", [{"type": "text", "text": LONG_OUTPUT},
                                    {"type": "text", "text": "x", "cache_control": {}}])
    after = mask_items(convert(fmt, events), MaskPolicy(window_turns=1), fmt)
    values = dict(result_values(fmt, after))
    assert values["call_0_0"][0]["cache_control"] == {"type": "ephemeral"}
    assert len(values["call_0_0"]) == 1
    assert values["call_1_0"][1] == {"type": "text", "text": "x", "cache_control": {}}


@only(ANTHROPIC)
def test_anthropic_fields_and_blocks_stay(fmt):
    """In Anthropic Messages the number and order of messages and blocks, every
    id, tool_use.input, cache_control and every other field stay as they
    are."""
    events = session(turns=3, calls_per_turn=2)
    events[2] = Result("call_0_0", LONG_OUTPUT, extra={"cache_control": {"type": "ephemeral"}})
    before = convert(fmt, events)
    after = mask_items(before, MaskPolicy(window_turns=1), fmt)
    assert changed_results(fmt, before, after) == ["call_0_0", "call_0_1", "call_1_0", "call_1_1"]
    assert skeleton(fmt, after) == skeleton(fmt, before)
    assert after[2]["content"][0]["cache_control"] == {"type": "ephemeral"}


@only(RESPONSES)
def test_responses_a_run_of_calls_is_one_turn_and_other_items_pass(fmt):
    """In OpenAI Responses a tool turn is a run of consecutive call items
    (function_call, custom_tool_call); items of other types (reasoning,
    computer calls) pass through."""
    items: list[object] = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "a", "name": "bash", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": LONG_OUTPUT},
        {"type": "function_call_output", "call_id": "b", "output": LONG_OUTPUT},
        {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "*** x"},
        {"type": "custom_tool_call_output", "call_id": "c", "output": LONG_OUTPUT},
        {"type": "computer_call", "call_id": "d", "action": {"type": "screenshot"}},
        {"type": "computer_call_output", "call_id": "d",
         "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA"}},
        {"type": "function_call", "call_id": "e", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "e", "output": LONG_OUTPUT},
    ]
    plan = plan_masking(fmt.index(items), MaskPolicy(window_turns=1), items)
    assert plan.tool_turns == 3
    after = mask_items(items, MaskPolicy(window_turns=1), fmt)
    assert [i for i, (old, new) in enumerate(zip(items, after, strict=True)) if old != new] == [
        4, 5, 7,
    ]
    assert "outil=apply_patch" in after[7]["output"]



# min_chars and exclude_tools -------------------------------------------------------------


def test_results_shorter_than_min_chars_are_never_masked():
    """Results shorter than min_chars are never masked."""
    events = session(turns=4)
    events[2] = Result("call_0_0", "x" * 500)
    assert masked_ids(events, window_turns=1, min_chars=501) == ["call_1_0", "call_2_0"]
    assert masked_ids(events, window_turns=1, min_chars=500) == [
        "call_0_0", "call_1_0", "call_2_0",
    ]


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_results_of_excluded_tools_are_never_masked(fmt):
    """The results of the tools named in exclude_tools are never masked."""
    events: list[Event] = [Say("user", "go")]
    for turn, name in enumerate(["read_file", "bash", "read_file", "bash"]):
        events += [Turn([Call(f"c{turn}", name)], text="t"), Result(f"c{turn}", LONG_OUTPUT)]
    assert masked_ids(events, fmt, window_turns=1, exclude_tools=("read_file",)) == ["c1"]


# max_input_tokens: the clipping stage ------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_the_clipping_stage_clips_the_oldest_results_in_the_window_first(fmt):
    """When the request is still above max_input_tokens after masking, results
    inside the window are clipped to head + marker + tail with the shared
    truncation function, oldest first, until it is under; no item is
    removed, and the plan says which stage ran."""
    events = session(turns=4)
    events[6] = Result("call_2_0", "A" * 30_000)
    events[8] = Result("call_3_0", "B" * 30_000)
    items = convert(fmt, events)
    policy = MaskPolicy(window_turns=2, max_input_tokens=10_000, clip_head_chars=100,
                        clip_tail_chars=50)
    plan = plan_masking(fmt.index(items), policy, items)
    assert plan.stage == "clipping"
    assert [d.call_id for d in plan.decisions if d.kind == MASKED] == ["call_0_0", "call_1_0"]
    # Oldest first: clipping call_2_0 alone brings the request under 10k tokens.
    assert [d.call_id for d in plan.decisions if d.kind == CLIPPED] == ["call_2_0"]
    after = mask_items(items, policy, fmt)
    assert len(after) == len(items) and skeleton(fmt, after) == skeleton(fmt, items)
    value = dict(result_values(fmt, after))["call_2_0"]
    text = value if isinstance(value, str) else value[0]["text"]
    assert text == truncate_text("A" * 30_000, 100, 50)
    assert text.startswith("A" * 100) and text.endswith("A" * 50) and TRUNCATION_MARK in text
    assert dict(result_values(fmt, after))["call_3_0"] == "B" * 30_000


def test_clipping_is_not_repeated_and_stage_is_masking_when_enough():
    events = session(turns=4)
    policy = {"window_turns": 2, "max_input_tokens": 1_000_000}
    assert plan_of(events, **policy).stage == "masking"
    assert plan_of(session(turns=1), **policy).stage == "none"
    clipped = truncate_text("A" * 30_000, 100, 50)
    assert truncate_text(clipped, 10, 10) == clipped


# preserve_patterns -------------------------------------------------------------------------


def test_preserved_block_survives_masking():
    """A block between a preserve_patterns pair survives masking: the masked
    result is the placeholder followed by the block."""
    events = session(turns=3)
    events[2] = Result("call_0_0", "noise " * 200 + "\n" + DISPATCH + "\nmore noise " * 50)
    after = mask_items(convert(CHAT, events), MaskPolicy(window_turns=1), CHAT)
    masked = dict(result_values(CHAT, after))["call_0_0"]
    assert masked.startswith("[Observation masquée") and masked.endswith("\n" + DISPATCH)
    # Idempotent with the block; with no patterns only the placeholder is left.
    assert mask_items(after, MaskPolicy(window_turns=1), CHAT) == after
    plain = mask_items(convert(CHAT, events), MaskPolicy(window_turns=1, preserve_patterns=()),
                       CHAT)
    assert DISPATCH not in dict(result_values(CHAT, plain))["call_0_0"]
