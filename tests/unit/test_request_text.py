"""Parsing a request body with the place of each conversation item
(``conversation/body/request_text.py``): the spans hold the items' own text, the
values read as ``json.loads`` reads them (duplicate keys, NaN), and a body
that cannot be rewritten raises UnsupportedBody with a reason that never
quotes the body."""

from __future__ import annotations

import json

import pytest

from obsmask_core.conversation.body.request_text import (
    NonFiniteNumber,
    UnsupportedBody,
    loads,
    parse_request,
)

ANTHROPIC_BODY = (
    '{ "model" : "m",\n  "messages" : [\n'
    '    {"role": "user", "content": "go"} ,\n'
    '    {"role":"user","content":[ {"type":"text","text":"a"},\n'
    '      {"type" : "tool_result", "tool_use_id" : "t1", "content" : "ok\\u00e9"} ]}\n'
    "  ] }\n"
)


def test_each_item_span_holds_the_items_own_text():
    """The span of an item is the item exactly as the client wrote it,
    spacing inside it included, and nothing around it."""
    parsed = parse_request(ANTHROPIC_BODY, "messages")
    assert parsed.members == json.loads(ANTHROPIC_BODY)
    assert parsed.items == json.loads(ANTHROPIC_BODY)["messages"]
    texts = [ANTHROPIC_BODY[start:end] for start, end in parsed.item_spans]
    assert texts[0] == '{"role": "user", "content": "go"}'
    assert texts[1].startswith('{"role":"user","content":[ {"type":"text"')
    assert texts[1].endswith('"content" : "ok\\u00e9"} ]}')


def test_the_conversation_may_be_another_member():
    """The conversation list is the member the format names (``input`` for
    OpenAI Responses); ``messages`` is then an ordinary member."""
    text = '{"messages": "not this", "input": [{"type": "message"}, 7]}'
    parsed = parse_request(text, "input")
    assert parsed.items == [{"type": "message"}, 7]
    assert [text[start:end] for start, end in parsed.item_spans] == ['{"type": "message"}', "7"]
    assert parsed.members["messages"] == "not this"


def test_span_at_follows_a_path_of_keys_and_indexes():
    parsed = parse_request(ANTHROPIC_BODY, "messages")
    span = parsed.span_at(1, ("content", 1, "content"))
    assert span is not None
    assert ANTHROPIC_BODY[span[0] : span[1]] == '"ok\\u00e9"'
    content = parsed.span_at(0, ("content",))
    assert content is not None and ANTHROPIC_BODY[content[0] : content[1]] == '"go"'
    whole = parsed.span_at(1, ())
    assert whole == parsed.item_spans[1]


@pytest.mark.parametrize(
    "path",
    [
        ("missing",),  # no such key
        ("content", 2),  # past the end of the list
        ("content", -1),  # negative indexes are not positions in the text
        ("content", 0, "text", "deeper"),  # into a string
        ("role", 0),  # an index into a string
        (0,),  # an index into an object
    ],
)
def test_span_at_is_none_where_the_path_leads_nowhere(path):
    parsed = parse_request(ANTHROPIC_BODY, "messages")
    assert parsed.span_at(1, path) is None


def test_the_last_of_duplicate_keys_wins_as_in_json_loads():
    """Values and spans both come from the last occurrence of a key, at the
    top level and inside an item."""
    text = '{"messages": "first", "messages": [{"content": "a", "content": "b"}]}'
    parsed = parse_request(text, "messages")
    assert parsed.members == json.loads(text)
    assert parsed.items == [{"content": "b"}]
    span = parsed.span_at(0, ("content",))
    assert span is not None and text[span[0] : span[1]] == '"b"'
    with pytest.raises(UnsupportedBody, match="'messages' is not a list"):
        parse_request('{"messages": [1], "messages": "later"}', "messages")


@pytest.mark.parametrize("where", ["item", "other member"])
def test_a_value_nested_too_deeply_is_refused_without_crashing(where):
    deep = "[" * 200_000 + "]" * 200_000
    text = (f'{{"messages": [{deep}]}}' if where == "item"
            else f'{{"tools": {deep}, "messages": []}}')
    with pytest.raises(UnsupportedBody, match="nested too deeply"):
        parse_request(text, "messages")


def test_only_white_space_may_follow_the_object():
    assert parse_request('{"messages": []} \r\n\t', "messages").items == []
    with pytest.raises(UnsupportedBody) as raised:
        parse_request('{"messages": []} x', "messages")
    assert str(raised.value) == "not valid JSON (extra data at character 17)"
    with pytest.raises(UnsupportedBody, match="extra data"):
        parse_request('{"messages": []}{"messages": []}', "messages")


@pytest.mark.parametrize(
    ("text", "reason"),
    [('{"model": "m"}', "the object has no 'messages'"),
     ('{"messages": {"0": "x"}}', "'messages' is not a list"),
     ('{"messages": [1,]}', "not valid JSON (Expecting value at character 16)")],
)
def test_a_body_that_is_not_a_request_object_says_why(text, reason):
    with pytest.raises(UnsupportedBody) as raised:
        parse_request(text, "messages")
    assert str(raised.value) == reason


@pytest.mark.parametrize(
    ("text", "expected", "position"),
    [('{"messages" [1]}', "':'", 12), ('{"a": 1,}', "a member name", 8),
     ("{1: 2}", "a member name", 1), ('{"messages": [1 2]}', "',' or ']'", 16),
     ('{"messages": []', "',' or '}'", 15)],
)
def test_a_syntax_error_says_what_was_expected_where(text, expected, position):
    with pytest.raises(UnsupportedBody) as raised:
        parse_request(text, "messages")
    assert str(raised.value) == f"not valid JSON (expected {expected} at character {position})"


def test_a_reason_never_quotes_the_body():
    """The reason goes to the log, and a body may carry secrets."""
    for text in ('{"messages": [{"content": "SECRET-1}]}', '{"SECRET-2" "x", "messages": []}',
                 '{"messages": [SECRET-3]}', '{"messages": []} SECRET-4'):
        with pytest.raises(UnsupportedBody) as raised:
            parse_request(text, "messages")
        assert "SECRET" not in str(raised.value)


def test_non_finite_numbers_are_equal_to_themselves():
    """NaN and Infinity (which Python's json accepts) parse to values equal
    to themselves, so a body compared before and after masking is equal."""
    text = '{"messages": [NaN, Infinity, -Infinity, 1.5]}'
    first, second = parse_request(text, "messages"), parse_request(text, "messages")
    assert first.items == second.items
    assert first.items[:3] == [NonFiniteNumber("NaN"), NonFiniteNumber("Infinity"),
                               NonFiniteNumber("-Infinity")]
    assert loads(text) == loads(text) == first.members


def test_reasons_for_bodies_that_are_not_json_objects():
    """The one log line must say why truthfully: not JSON at all, or JSON
    that is not an object."""


    cases = {
        "not json {": "not valid JSON",
        "nulll": "not valid JSON (extra data",
        "[1] x": "not valid JSON (extra data",
        "null": "the JSON is not an object",
        " [1, 2] ": "the JSON is not an object",
        "  ": "the body is empty",
    }
    for text, reason in cases.items():
        with pytest.raises(UnsupportedBody) as raised:
            parse_request(text, "messages")
        assert str(raised.value).startswith(reason), (text, str(raised.value))


def test_a_number_too_big_for_a_float_is_kept_as_written():
    """1e400 overflows a float: it is read like NaN and Infinity, as the
    text it was written as, never as inf."""
    from obsmask_core.conversation.body.request_text import NonFiniteNumber, loads

    assert loads('[1e400, -1e400, 1.5, 2]') == [NonFiniteNumber("1e400"),
                                                NonFiniteNumber("-1e400"), 1.5, 2]
