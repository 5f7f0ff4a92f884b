"""Cutting the long strings of JSON-RPC responses (``mcp/cut.py``): a string
over ``max_chars`` becomes its first ``head_chars`` characters + the marker +
its last ``tail_chars``, only when that makes it shorter, never twice, on the
decoded value (not its escapes), and every byte outside the cut strings stays
as it came. Each response of a batch is cut at its own tool's limit; with
recall on, a cut string's marker carries its store id and the whole string
is handed over for the store."""

from __future__ import annotations

import json

import pytest

from obsmask_core.mcp.cut import cut_string, truncate_jsonrpc_body, truncate_jsonrpc_text
from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.mcp.tool_limits import AnswerLimits
from obsmask_core.shared.recall_text import store_id
from obsmask_core.shared.truncation import TruncationMarker
from support.mcp_messages import (
    DEFAULTS,
    LONG,
    PLAIN_MARKER_TEMPLATE,
    README_MARKER_TEMPLATE,
    expected_cut,
    marker_text,
    numbered,
    response,
    text_block,
    truncated,
)

# Head + marker + tail ------------------------------------------------------------------


def test_ten_thousand_chars_become_head_marker_tail():
    """A string of 10,000 characters comes out as its first 2,000 characters,
    the marker and its last 2,000: no longer than max_chars plus the marker,
    with head, marker and tail present and the middle gone."""
    original = numbered(10_000)
    message = truncated(response({"content": [text_block(original)]}))
    out = message["result"]["content"][0]["text"]
    marker = marker_text(README_MARKER_TEMPLATE, 10_000, 2000, 2000)
    assert len(out) <= DEFAULTS.max_chars + len(marker)
    assert out.startswith(original[:2000])
    assert out.endswith(original[-2000:])
    assert marker in out
    assert out == original[:2000] + marker + original[-2000:]
    assert original[2000:8000] not in out and original[2001:2020] not in out


def test_long_strings_are_cut_at_any_depth_and_the_structure_stays():
    """In a result made of objects, lists and nested objects, every long string
    is cut wherever it sits, and the structure stays as it was: the same
    keys, the same list lengths, the same types."""
    long_a, long_b, long_c = numbered(9000, "a"), numbered(5000, "b"), numbered(4500, "c")
    result = {
        "content": [text_block(long_a), text_block("short"), {"type": "text", "text": ""}],
        "structuredContent": {
            "rows": [long_b, 42, None, True, 1.5, {"deep": {"deeper": [long_c, "ok"]}}],
            "count": 3,
        },
        "isError": False,
    }
    message = truncated(response(result))
    assert message == response({
        "content": [text_block(expected_cut(long_a)), text_block("short"),
                    {"type": "text", "text": ""}],
        "structuredContent": {
            "rows": [expected_cut(long_b), 42, None, True, 1.5,
                     {"deep": {"deeper": [expected_cut(long_c), "ok"]}}],
            "count": 3,
        },
        "isError": False,
    })


@pytest.mark.parametrize(
    ("length", "cut"),
    [(4000, False), (4001, False), (4069, False), (4070, True), (4071, True), (10_000, True)],
)
def test_a_string_is_cut_only_when_long_and_cutting_shortens_it(length, cut):
    """Only strings longer than max_chars are cut, and a string stays whole
    when head + marker + tail would not be shorter than it (the default
    marker is 69 characters for a 4-digit length)."""
    original = numbered(length)
    text = json.dumps(response({"content": [text_block(original)]}))
    outcome = truncate_jsonrpc_text(text, DEFAULTS)
    assert outcome.scan.problem is None
    if not cut:
        assert outcome.text is None and outcome.cuts == []
        assert cut_string(original, DEFAULTS, TruncationMarker(README_MARKER_TEMPLATE)) is None
        return
    assert json.loads(outcome.text)["result"]["content"][0]["text"] == expected_cut(original)
    [string_cut] = outcome.cuts
    assert string_cut.chars_before == length
    assert string_cut.chars_after == len(expected_cut(original)) < length
    assert string_cut.removed == original[2000 : length - 2000]
    assert outcome.chars_before == length


def test_small_limits_and_a_zero_tail_are_followed():
    """Limits are configurable; with tail_chars = 0 the string is head + marker."""
    limits = TruncationLimits(max_chars=10, head_chars=3, tail_chars=0, marker_template="<cut>")
    marker = TruncationMarker(limits.marker_template)
    assert cut_string("x" * 10, limits, marker) is None
    assert cut_string("abcdefghijk", limits, marker) == "abc<cut>"
    assert truncated(response(["abcdefghijk", "short"]), limits) == response(["abc<cut>", "short"])


# Idempotence ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "limits",
    [DEFAULTS, TruncationLimits(max_chars=50, head_chars=25, tail_chars=25,
                                marker_template="«{head}+{tail} of {original_chars} kept»")],
    ids=["default-marker", "custom-marker"],
)
def test_a_cut_string_is_not_cut_again(limits):
    """A string that already carries the marker is not cut again. With the
    defaults a cut string (4069+ chars) is still longer than max_chars: only
    the marker keeps it whole."""
    original = numbered(20_000)
    once = truncate_jsonrpc_text(json.dumps(response([original])), limits)
    assert once.text is not None
    cut = json.loads(once.text)["result"][0]
    assert cut == expected_cut(original, limits) and len(cut) > limits.max_chars
    again = truncate_jsonrpc_text(once.text, limits)
    assert again.scan.problem is None and again.text is None and again.cuts == []
    # A marker rendered with other numbers, anywhere in a long string, counts too.
    other = marker_text(limits.marker_template, 123456, 7, 8)
    carrying = numbered(10_000)[:5000] + other + numbered(10_000)[5000:]
    outcome = truncate_jsonrpc_text(json.dumps(response([carrying])), limits)
    assert outcome.text is None


# Size ----------------------------------------------------------------------------------


def test_a_fifty_megabyte_result_is_cut_to_head_marker_and_tail():
    """A 50 MB result is cut like a small one, to a body of a few KB (how
    long it takes is bench_mcp_truncation's to say)."""
    original = "z" * 25_000_000 + "y" * 25_000_000
    body = json.dumps(response({"content": [text_block(original)]})).encode()
    outcome = truncate_jsonrpc_body(body, DEFAULTS)
    assert outcome.body is not None, outcome.reason
    assert json.loads(outcome.body) == response({"content": [text_block(expected_cut(original))]})
    assert len(outcome.body) < 5000


# Bodies ---------------------------------------------------------------------------------


def test_a_body_that_is_not_utf8_passes():
    """A body that is not UTF-8 cannot be JSON: it passes, with the reason."""
    body = json.dumps(response([LONG])).encode().replace(b"000", b"0\xff0", 1)
    outcome = truncate_jsonrpc_body(body, DEFAULTS)
    assert outcome.body is None and "UTF-8" in outcome.reason


# Byte identity ----------------------------------------------------------------------


def test_bytes_outside_the_cut_strings_are_unchanged():
    """Everything but the cut strings is kept byte for byte: the output is the
    input with only the cut strings' tokens replaced — odd whitespace,
    escapes, number spellings and key order included."""
    long_a = "é" * 3000 + numbered(3000) + "😀" * 100
    long_b = numbered(5000) + '"quoted" \\ back\nslash\t'
    template = (
        '\r\n\t{ "id" :\t"req-\\u00e9" ,\r\n  "result":{\n'
        '      "content" : [ {"type":"text" , "text" : @A@ } ,\n'
        '\t\t{"text":"\\u00e9\\n\\/short", "n": -0, "f": 1.0E+2, "e": 1e-7}],\n'
        '  "structuredContent" :{"x":[ @B@ ,true,false,null , [ ] , { } ]} } ,'
        '"jsonrpc"   :   "2.0"   }  \n\n'
    )
    original = template.replace("@A@", json.dumps(long_a)).replace("@B@", json.dumps(long_b))
    expected = template.replace(
        "@A@", json.dumps(expected_cut(long_a), ensure_ascii=False)
    ).replace("@B@", json.dumps(expected_cut(long_b), ensure_ascii=False))
    outcome = truncate_jsonrpc_text(original, DEFAULTS)
    assert outcome.text == expected
    body = truncate_jsonrpc_body(original.encode(), DEFAULTS)
    assert body.body == expected.encode() and body.reason == "truncated"


def test_length_is_judged_on_the_value_not_on_its_escapes():
    """"each string longer than max_chars": 3000 characters written as 18000
    characters of \\u escapes are not longer than 4000, and an emoji is one
    character, so a cut never splits one."""
    escaped = json.dumps(response(["é" * 3000]))  # ensure_ascii: \u00e9 each
    assert truncate_jsonrpc_text(escaped, DEFAULTS).text is None
    emoji = "😀" * 5000
    outcome = truncate_jsonrpc_text(json.dumps(response([emoji])), DEFAULTS)
    assert outcome.text is not None
    assert json.loads(outcome.text)["result"][0] == expected_cut(emoji)


def test_a_lone_surrogate_escape_stays_an_escape():
    """A cut string holding a lone surrogate (legal in JSON text, not in
    UTF-8) is written back with escapes, so the body still encodes."""
    original = "\ud800" + numbered(6000) + "\udfff"
    body = json.dumps(response([original])).encode()
    outcome = truncate_jsonrpc_body(body, DEFAULTS)
    assert outcome.body is not None
    assert json.loads(outcome.body)["result"][0] == expected_cut(original)


# Recall ---------------------------------------------------------------------------------


def test_with_recall_on_each_cut_string_carries_its_store_id_and_its_original():
    """With recall on, the marker of each cut string carries "; recall
    id=cut-...", the store id of the whole string, and the cut hands over that
    id and the whole string for the store."""
    first, second = numbered(9000, "a"), numbered(5000, "b")
    text = json.dumps(response({"content": [text_block(first), text_block(second)]}))
    outcome = truncate_jsonrpc_text(text, DEFAULTS, recall=True)
    assert outcome.text is not None
    blocks = json.loads(outcome.text)["result"]["content"]
    assert [block["text"] for block in blocks] == [
        expected_cut(first, recall_id=store_id(first)),
        expected_cut(second, recall_id=store_id(second)),
    ]
    assert [(cut.recall_id, cut.original) for cut in outcome.cuts] == [
        (store_id(first), first), (store_id(second), second)]
    assert "; recall id=cut-" in blocks[0]["text"]


def test_with_recall_off_no_id_or_original_is_kept_and_the_marker_is_plain():
    original = numbered(9000)
    outcome = truncate_jsonrpc_text(json.dumps(response([original])), DEFAULTS)
    assert outcome.text is not None
    assert json.loads(outcome.text)["result"] == [expected_cut(original)]
    assert expected_cut(original) == (original[:2000] + marker_text(
        PLAIN_MARKER_TEMPLATE, 9000, 2000, 2000) + original[-2000:])
    [cut] = outcome.cuts
    assert cut.recall_id is None and cut.original is None


def test_a_string_cut_with_recall_is_not_cut_again_with_or_without_it():
    original = numbered(20_000)
    once = truncate_jsonrpc_text(json.dumps(response([original])), DEFAULTS, recall=True)
    assert once.text is not None
    for recall in (True, False):
        again = truncate_jsonrpc_text(once.text, DEFAULTS, recall=recall)
        assert again.text is None and again.cuts == []


# Limits per response ----------------------------------------------------------------------


def answer_limits(rules: list[tuple[str, str]], tools: dict[str, str],
                  server: str = "fs", ceilings: dict[str, int] | None = None) -> AnswerLimits:
    limits = TruncationLimits(max_chars_for=tuple(rules))
    return AnswerLimits(limits.tool_limits(), server, tools.get, (ceilings or {}).get)


def test_a_batch_cuts_each_response_at_the_limit_of_its_own_tool():
    """A batch may answer calls of several tools: each response's strings are
    cut over its own tool's limit, with head and tail in the default's
    proportions (half and half), and a response to no known tool at
    max_chars."""
    per_message = answer_limits([("fs/read_*", "10000"), ("*/search", "3000")],
                                {"1": "read_file", "2": "search"})
    long, middle = numbered(12_000, "l"), numbered(6000, "m")
    batch = [response([long, middle], 1), response([long, middle], 2),
             response([long, middle], 3)]
    outcome = truncate_jsonrpc_text(json.dumps(batch), DEFAULTS, per_message=per_message)
    assert outcome.text is not None
    read, search, other = (message["result"] for message in json.loads(outcome.text))
    assert read == [expected_cut(long, head=5000, tail=5000), middle]
    assert search == [expected_cut(long, head=1500, tail=1500),
                      expected_cut(middle, head=1500, tail=1500)]
    assert other == [expected_cut(long), expected_cut(middle)]
    assert sorted((cut.message, cut.head, cut.tail) for cut in outcome.cuts) == [
        (0, 5000, 5000), (1, 1500, 1500), (1, 1500, 1500), (2, 2000, 2000), (2, 2000, 2000)]


def test_a_response_whose_limit_is_zero_is_never_cut():
    per_message = answer_limits([("*/read_file", "0")], {"1": "read_file"})
    huge = numbered(200_000)
    batch = [response([huge], 1), response([huge], 2)]
    outcome = truncate_jsonrpc_text(json.dumps(batch), DEFAULTS, per_message=per_message)
    assert outcome.text is not None
    kept, cut = json.loads(outcome.text)
    assert kept["result"] == [huge] and cut["result"] == [expected_cut(huge)]


def test_a_declared_ceiling_lets_a_tool_keep_more():
    per_message = answer_limits([], {"1": "read_file", "2": "search"},
                                ceilings={"read_file": 50_000, "search": 100})
    long = numbered(30_000)
    batch = [response([long], 1), response([long], 2)]
    outcome = truncate_jsonrpc_text(json.dumps(batch), DEFAULTS, per_message=per_message)
    assert outcome.text is not None
    read, search = json.loads(outcome.text)
    assert read["result"] == [long] and search["result"] == [expected_cut(long)]
