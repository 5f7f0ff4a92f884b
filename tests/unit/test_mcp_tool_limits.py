"""Limits aimed at some servers and tools (``mcp/tool_limits.py``): the
``max_chars_for`` rules (SERVER_GLOB/TOOL_GLOB and a number; the first that
matches wins; 0 never cuts; head and tail in the default's proportions), and
the ceilings servers declare for their tools in tools/list answers, honoured
only when larger and never beyond 500,000 characters."""

from __future__ import annotations

import json

import pytest

from obsmask_core.mcp.jsonrpc_scan import scan_jsonrpc
from obsmask_core.mcp.limits import TruncationLimits
from obsmask_core.mcp.tool_limits import (
    CEILING_KEY,
    AnswerLimits,
    Limit,
    LimitRule,
    ToolCeilings,
    ToolLimits,
    declared_ceilings,
    parse_rule,
)
from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.settings import check_value


def tool_limits(*rules: tuple[str, str], max_chars: int = 4000, head: int = 2000,
                tail: int = 2000) -> ToolLimits:
    return TruncationLimits(max_chars=max_chars, head_chars=head, tail_chars=tail,
                            max_chars_for=rules).tool_limits()


# Rules -----------------------------------------------------------------------------


def test_a_rule_is_a_server_glob_a_tool_glob_and_a_number():
    assert parse_rule("k", "fast-filesystem/read_*", "20000") == LimitRule(
        "fast-filesystem", "read_*", 20_000)
    assert parse_rule("k", "*/search", "0") == LimitRule("*", "search", 0)


def test_a_pattern_without_a_slash_is_a_tool_on_any_server():
    assert parse_rule("k", "search", "8000") == LimitRule("*", "search", 8000)
    limits = tool_limits(("search", "8000"))
    assert limits.limit("fs", "search").max_chars == 8000
    assert limits.limit("db.example.com", "search").max_chars == 8000
    assert limits.limit("fs", "search_all").max_chars == 4000


@pytest.mark.parametrize(
    ("pattern", "number"),
    [("fs/", "10"), ("/read", "10"), ("fs read/x", "10"), ("fs/read ", "10"),
     ("fs/read", "-5"), ("fs/read", "ten"), ("fs/read", "1.5"), ("fs/read", " 7"),
     ("fs/read", "1_000")],
)
def test_a_bad_rule_is_refused_naming_the_key(pattern, number):
    """A pattern with an empty side of its "/" or with a space, and a number
    that is not a whole number of characters (0 or more), are refused: the
    setting names max_chars_for."""
    with pytest.raises(SettingError) as raised:
        TruncationLimits(max_chars_for=((pattern, number),))
    assert raised.value.key == "max_chars_for"
    assert repr(pattern) in raised.value.message
    with pytest.raises(SettingError) as from_file:
        check_value(TruncationLimits, "max_chars_for", [[pattern, number]])
    assert from_file.value.key == "max_chars_for"


def test_an_empty_pattern_or_number_is_refused_as_the_file_gives_it():
    for pair in (["", "10"], ["fs/read", ""], ["fs/read"], "fs/read|10"):
        with pytest.raises(SettingError) as raised:
            check_value(TruncationLimits, "max_chars_for", [pair])
        assert raised.value.key == "max_chars_for"


def test_the_first_matching_rule_wins():
    limits = tool_limits(("fs/read_file", "100"), ("fs/read_*", "20000"), ("*/*", "9000"))
    assert limits.limit("fs", "read_file").max_chars == 100
    assert limits.limit("fs", "read_dir").max_chars == 20_000
    assert limits.limit("fs", "write").max_chars == 9000
    assert limits.limit("db", "read_file").max_chars == 9000


def test_globs_are_case_sensitive_and_match_whole_names():
    limits = tool_limits(("FS/Read?", "100"), ("fs/[rw]ead", "200"))
    assert limits.limit("FS", "Reads").max_chars == 100
    assert limits.limit("fs", "reads").max_chars == 4000
    assert limits.limit("fs", "read").max_chars == 200
    assert limits.limit("fs", "wead").max_chars == 200
    assert limits.limit("fs", "read_file").max_chars == 4000
    assert limits.limit("xfs", "read").max_chars == 4000


def test_head_and_tail_keep_the_proportions_of_the_defaults():
    """With max_chars 4000, head 1000 and tail 3000, a tool allowed 20000
    keeps 5000 and 15000; rounding down never lets head + tail exceed N."""
    limits = tool_limits(("*/big", "20000"), ("*/odd", "7"), max_chars=4000, head=1000,
                         tail=3000)
    assert limits.limit("fs", "big") == Limit(20_000, 5000, 15_000)
    assert limits.limit("fs", "odd") == Limit(7, 1, 5)
    assert limits.limit("fs", "other") == Limit(4000, 1000, 3000)


def test_zero_never_cuts_that_tool():
    limits = tool_limits(("fs/*", "0"))
    assert limits.limit("fs", "read_file").max_chars == 0
    assert limits.limit("fs", None).max_chars == 0  # "*" matches no tool too
    assert limits.limit("db", "read_file").max_chars == 4000


def test_a_response_to_no_tool_call_is_matched_only_by_a_tool_glob_that_matches_nothing():
    """An answer to resources/read, or to a request obsmask did not see, has
    no tool name: "fs/*" covers it, "fs/read*" does not."""
    limits = tool_limits(("fs/read*", "100"), ("db/*", "200"))
    assert limits.limit("fs", None).max_chars == 4000
    assert limits.limit("db", None).max_chars == 200


def test_the_smallest_limit_of_a_server_is_what_a_scan_looks_for():
    limits = tool_limits(("fs/*", "0"), ("fs/search", "500"), ("db/*", "100"))
    assert limits.smallest("fs") == 500
    assert limits.smallest("db") == 100
    assert limits.smallest("other") == 4000
    assert tool_limits(("*/*", "0"), max_chars=1, head=0, tail=0).smallest("fs") == 1


def test_answer_limits_find_each_response_by_its_id():
    """A response's tool is the one its request's id called, whatever the
    id's spelling."""
    answer = AnswerLimits(tool_limits(("fs/read_*", "10000")), "fs",
                          {'"a"': "read_file"}.get)
    scan = scan_jsonrpc(json.dumps([{"jsonrpc": "2.0", "id": "a", "result": 1},
                                    {"jsonrpc": "2.0", "id": "b", "result": 1}])
                        .replace('"a"', '"\\u0061"'))
    assert [answer.of(message).max_chars for message in scan.messages] == [10_000, 4000]
    assert answer.scan_chars == 4000


# Declared ceilings -------------------------------------------------------------------


def tools_list(*tools: dict[str, object], message_id: int = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": message_id, "result": {"tools": list(tools)}}


def tool(name: object, ceiling: object = None) -> dict[str, object]:
    declared: dict[str, object] = {"name": name, "inputSchema": {"type": "object"}}
    if ceiling is not None:
        declared["_meta"] = {CEILING_KEY: ceiling, "other/key": 1}
    return declared


def test_ceilings_are_read_from_a_tools_list_answer():
    text = json.dumps([
        tools_list(tool("read_file", 30_000), tool("search"), tool("huge", 2_000_000),
                   tool("float", 12_000.0), message_id=1),
        tools_list(tool("flag", True), tool("negative", -1), tool("text", "9000"),
                   tool(42, 9000), tool("zero", 0), message_id=2),
    ])
    assert declared_ceilings(text.encode()) == {
        "read_file": 30_000, "search": None, "huge": 500_000, "float": 12_000, "flag": None,
        "negative": None, "text": None, "zero": None}


def test_a_text_without_the_key_or_not_json_declares_nothing():
    assert declared_ceilings(json.dumps(tools_list(tool("read_file"))).encode()) == {
        "read_file": None}
    assert declared_ceilings(b'{"tools": [{"inputSchema": {}, "' + CEILING_KEY.encode()) == {}
    listed = json.dumps(tools_list(tool("read_file", 30_000)))
    deep = "[" * 100_000 + listed + "]" * 100_000  # too deep to load
    assert declared_ceilings(deep.encode()) == {}


def test_a_ceiling_raises_the_limit_only_when_larger():
    limits = tool_limits(("fs/search", "8000"))
    assert limits.limit("fs", "read_file", 30_000) == Limit(30_000, 15_000, 15_000)
    assert limits.limit("fs", "read_file", 1000) == Limit(4000, 2000, 2000)
    assert limits.limit("fs", "search", 6000).max_chars == 8000
    assert limits.limit("fs", "search", 9000).max_chars == 9000


def test_a_ceiling_is_capped_at_500000_chars():
    assert tool_limits().limit("fs", "read_file", 10_000_000).max_chars == 500_000


def test_a_ceiling_never_makes_a_tool_that_is_never_cut_cut():
    assert tool_limits(("fs/*", "0")).limit("fs", "read_file", 30_000).max_chars == 0


def test_ceilings_are_remembered_per_server_and_tool_and_the_oldest_forgotten():
    ceilings = ToolCeilings(size=3)
    ceilings.remember("fs", {"read_file": 30_000, "search": 9000})
    ceilings.remember("db", {"read_file": 7000})
    assert ceilings.get("fs", "read_file") == 30_000 and ceilings.get("db", "read_file") == 7000
    assert ceilings.get("db", "search") is None
    ceilings.remember("fs", {"read_file": 40_000})  # a newer answer: newest again
    ceilings.remember("web", {"fetch": 100_000})
    assert len(ceilings) == 3
    assert ceilings.get("fs", "search") is None  # the oldest went first
    assert ceilings.get("fs", "read_file") == 40_000
