"""Finding a planned value in the body by its bytes (the quick reader's way):
only where a value can start and end (a member's after its own name), in
order, with the client's encoder."""

from __future__ import annotations

import json

import orjson

from obsmask_core.conversation.body import value_search
from obsmask_core.conversation.body.value_search import _encoded, _utf8_json, find_values


def test_a_value_is_found_where_a_member_value_is_written():
    body = b'{"messages": [{"role": "tool", "content": "out"}]}'
    [span] = find_values(body, [("out", "content", None)]) or []
    assert body[span[0]:span[1]] == b'"out"'


def test_a_match_that_starts_inside_a_string_is_not_taken():
    # '\"out"' ends the first string with an escaped quote: the bytes '"out"'
    # are there, but no value starts at them.
    body = b'{"a": "say \\"out", "b": "out"}'
    [span] = find_values(body, [("out", "b", None)]) or []
    assert span[0] == body.rindex(b'"out"')


def test_a_member_name_with_the_same_bytes_is_not_taken_for_the_value():
    body = b'{"out": 1, "content": "out"}'
    [span] = find_values(body, [("out", "content", None)]) or []
    assert span == (body.rindex(b'"out"'), len(body) - 1)


def test_two_equal_values_are_found_in_order_each_once():
    body = b'[{"content": "same"}, {"content": "same"}]'
    spans = find_values(body, [("same", "content", None), ("same", "content", None)])
    assert spans is not None and spans[0][1] <= spans[1][0]


def test_a_value_written_by_pythons_json_with_ascii_escapes_is_found():
    value = "caf\u00e9 \u2028 \U0001f600"
    body = json.dumps({"content": value}).encode()
    assert orjson.dumps(value) not in body  # orjson writes the UTF-8 itself
    [span] = find_values(body, [(value, "content", None)]) or []
    assert json.loads(body[span[0]:span[1]]) == value


def test_a_list_of_blocks_written_with_spaces_after_separators_is_found():
    blocks = [{"type": "text", "text": "a"}, {"type": "image", "source": {"data": "AA"}}]
    body = json.dumps({"content": blocks}, ensure_ascii=False).encode()
    [span] = find_values(body, [(blocks, "content", None)]) or []
    assert json.loads(body[span[0]:span[1]]) == blocks


def test_an_array_element_needs_an_opening_bracket_or_a_comma_before_it():
    body = b'{"k": "v", "list": ["v"]}'
    [span] = find_values(body, [("v", 0, None)]) or []
    assert span[0] == body.rindex(b'"v"')


def test_a_value_written_some_other_way_is_not_found_and_the_exact_reader_takes_over():
    body = b'{"content": "caf\\u00E9"}'  # upper-case hex: none of the encoders writes it
    assert find_values(body, [("caf\u00e9", "content", None)]) is None


def test_a_value_before_the_previous_one_is_not_found():
    body = b'[{"content": "b"}, {"content": "a"}]'
    assert find_values(body, [("a", "content", None), ("b", "content", None)]) is None


def test_a_value_is_found_after_its_anchor_not_in_an_earlier_copy_that_stays():
    """Agents repeat outputs: a kept result and a later identical one to
    mask. The later one's call id, written after the kept copy, anchors the
    search."""
    body = (b'{"messages": [{"role": "tool", "tool_call_id": "c1", "content": "same"}, '
            b'{"role": "assistant", "tool_calls": [{"id": "c2"}]}, '
            b'{"role": "tool", "tool_call_id": "c2", "content": "same"}]}')
    [span] = find_values(body, [("same", "content", "c2")]) or []
    assert span[0] == body.rindex(b'"same"')
    [unanchored] = find_values(body, [("same", "content", None)]) or []
    assert unanchored[0] == body.index(b'"same"')


def test_a_value_written_before_its_anchor_is_looked_for_from_the_previous_value():
    body = b'[{"content": "out", "tool_call_id": "c1"}]'
    [span] = find_values(body, [("out", "content", "c1")]) or []
    assert body[span[0]:span[1]] == b'"out"'


def test_an_anchor_that_is_not_in_the_body_leaves_the_search_as_it_was():
    body = b'[{"content": "out"}]'
    [span] = find_values(body, [("out", "content", "c9")]) or []
    assert body[span[0]:span[1]] == b'"out"'


def test_a_result_that_reads_as_its_own_call_id_is_found_as_the_result():
    """The call id is written twice before the result (in the call, and as
    the result's ``tool_call_id``): a result with the same text is the
    member named as the result, not either id."""
    body = (b'{"messages": [{"role": "assistant", "tool_calls": [{"id": "call_0"}]}, '
            b'{"role": "tool", "tool_call_id": "call_0", "content": "call_0"}]}')
    [span] = find_values(body, [("call_0", "content", "call_0")]) or []
    assert span[0] == body.rindex(b'"call_0"')


def test_a_value_under_another_members_name_is_not_found():
    body = b'{"messages": [{"role": "tool", "tool_call_id": "out"}]}'
    assert find_values(body, [("out", "content", None)]) is None


def test_a_body_python_wrote_keeping_utf8_misses_each_wrong_encoder_once_not_per_value(
        monkeypatch):
    """Python's json.dumps(ensure_ascii=False) writes strings as orjson does
    and objects as json.dumps does: an encoder that missed a value is not
    the body's and goes last, so the searches that find nothing (each one
    reads the rest of the body) stay few, however long the body."""
    pairs = [({"command": f"ls {n}"}, f"caf\u00e9 {n}") for n in range(40)]
    document = {"items": [{"input": call, "content": out} for call, out in pairs]}
    body = json.dumps(document, ensure_ascii=False).encode()
    values = [(value, name, None) for call, out in pairs
              for value, name in ((call, "input"), (out, "content"))]
    misses = []
    search = value_search._find_encoded

    def counted(*args: object, **kwargs: object) -> object:
        found = search(*args, **kwargs)  # type: ignore[arg-type]
        if found is None:
            misses.append(args[1])
        return found

    monkeypatch.setattr(value_search, "_find_encoded", counted)
    spans = find_values(body, values) or []
    assert [json.loads(body[start:end]) for start, end in spans] == [v for v, _, _ in values]
    assert len(misses) <= 3


def test_a_lone_surrogate_is_no_value_the_utf8_encoder_writes():
    """json.dumps keeps it, and UTF-8 cannot encode it; orjson refuses it."""
    assert _encoded(_utf8_json, "a\ud800b") is None
