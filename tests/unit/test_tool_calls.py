"""The calls of a tool turn as re-fetch detection compares them
(``conversation/turns/tool_calls.py``): the same tool with the same arguments as
JSON is the same call in every wire format, whatever the key order and the
whitespace; and a call counts as only reading when its tool or its shell
command is known to read, never otherwise."""

from __future__ import annotations

import pytest

from obsmask_core.conversation.turns.tool_calls import calls_of, command_reads_only, reads_only
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, RESPONSES, WireFormat
from support.formats import Call, Event, Result, Say, Turn, convert

FORMATS = [CHAT, ANTHROPIC, RESPONSES]


def keys_of(fmt: WireFormat, events: list[Event]) -> list[bytes]:
    items = convert(fmt, events)
    index = fmt.index(items)
    return [key for turn in index.turns for _, _, key, _ in calls_of(items, turn)]


def two_calls(first: object, second: object, name: str = "read_file") -> list[Event]:
    return [Say("user", "go"),
            Turn([Call("a", name, first)]), Result("a", "x"),
            Turn([Call("b", name, second)]), Result("b", "y")]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_arguments_that_differ_only_in_key_order_or_whitespace_are_the_same_call(fmt):
    first = '{"path": "src/a.py", "limit": 50}'
    second = '{ "limit":50,\n  "path":"src/a.py" }'
    if fmt is ANTHROPIC:  # Anthropic's input is an object: its key order is what differs
        first, second = {"path": "src/a.py", "limit": 50}, {"limit": 50, "path": "src/a.py"}
    one, two = keys_of(fmt, two_calls(first, second))
    assert one == two


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_other_arguments_or_another_tool_make_another_call(fmt):
    one, two = keys_of(fmt, two_calls({"path": "a"}, {"path": "b"}))
    assert one != two
    events = [Say("user", "go"), Turn([Call("a", "read_file", {"path": "a"})]), Result("a", "x"),
              Turn([Call("b", "view", {"path": "a"})]), Result("b", "y")]
    one, two = keys_of(fmt, events)
    assert one != two


def test_arguments_that_are_not_json_compare_as_their_text_without_outer_whitespace():
    one, two = keys_of(CHAT, two_calls("cat a.py ", "  cat a.py"))
    assert one == two
    one, two = keys_of(CHAT, two_calls("cat a.py", "cat b.py"))
    assert one != two


def test_parallel_calls_of_one_turn_are_read_in_their_order():
    events = [Say("user", "go"),
              Turn([Call("a", "read_file", {"path": "a"}), Call("b", "grep", {"q": "x"})]),
              Result("a", "x"), Result("b", "y")]
    for fmt in FORMATS:
        items = convert(fmt, events)
        index = fmt.index(items)
        assert [call_id for call_id, _, _, _ in calls_of(items, index.turns[0])] == ["a", "b"]


@pytest.mark.parametrize("name", ["Read", "read_file", "Grep", "Glob", "LS", "view"])
def test_known_reading_tools_only_read(name):
    assert reads_only(name, {"file_path": "a.py"})


@pytest.mark.parametrize("name", ["Edit", "Write", "apply_patch", "str_replace_editor", None])
def test_a_tool_not_known_to_read_counts_as_a_change(name):
    assert not reads_only(name, {"file_path": "a.py", "new_string": "x"})


@pytest.mark.parametrize("command", [
    "cat src/a.py",
    "cd /testbed && sed -n '10,20p' src/a.py",
    "grep -rn foo src | head -20",
    "git status && git diff -- src/a.py",
    "ls -la 2>&1",
    "find . -name '*.py' 2>/dev/null | wc -l",
])
def test_a_shell_line_of_plain_reads_only_reads(command):
    assert command_reads_only(command)
    assert reads_only("bash", {"command": command})
    assert reads_only("shell", {"command": ["bash", "-lc", command]})


@pytest.mark.parametrize("command", [
    "sed -i 's/a/b/' src/a.py",
    "sed -i.bak 's/a/b/' src/a.py",
    "echo x > src/a.py",
    "cat a >> b",
    "cp a.py.backup a.py",
    "git checkout src/a.py",
    "python -m pytest tests",
    "cat a | tee b",
    "find . -name '*.pyc' -delete",
    "cat $(ls)",
])
def test_a_shell_line_that_may_write_or_run_counts_as_a_change(command):
    assert not command_reads_only(command)
    assert not reads_only("bash", {"command": command})


def test_arguments_nested_past_pythons_recursion_are_read_without_an_error():
    """Bad input never breaks the rewrite: arguments nested deeper than
    Python can write (where it cannot: 3.11 stops earlier than 3.12) are
    read, and either written whole, so the same arguments are the same
    call, or given a key of the call's own, the same call as no other."""
    deep: dict[str, object] = {}
    inner = deep
    for _ in range(1200):
        inner["a"] = {}
        inner = inner["a"]  # type: ignore[assignment]
    events = [Say("user", "go"), Turn([Call("a", "grep", deep)]), Result("a", "x"),
              Turn([Call("b", "grep", deep)]), Result("b", "y")]
    items = convert(ANTHROPIC, events)
    index = ANTHROPIC.index(items)
    one, two = (key for turn in index.turns for _, _, key, _ in calls_of(items, turn))
    assert (one, two) == (b"\x01a", b"\x01b") or (one == two and one.startswith(b"grep\x00{"))
