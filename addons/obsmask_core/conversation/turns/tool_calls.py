"""The calls of a tool turn, as re-fetch detection compares them: the tool,
its arguments as canonical JSON, and whether the call only reads.

Two calls are the same call when they name the same tool with the same
arguments, compared as JSON values: key order and whitespace do not count
(the model writes ``{"path": "a", "limit": 5}`` one turn and ``{"limit":5,
"path":"a"}`` the next). Arguments that are not JSON compare as their text
without surrounding whitespace.

Whether a call only reads decides whether a repeat of an earlier call had a
reason of its own: a call in between that may change something (an edit, a
write, a test run, a shell command that is not a plain read) explains why
the model looked again. The reading is deliberately narrow: a tool or a
command not known to only read counts as a change, so a repeat after it is
never blamed on masking.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import orjson

from obsmask_core.conversation.turns.tool_turns import RESPONSES_CALL_TYPES
from obsmask_core.conversation.turns.turn_model import ToolTurn

# One call of a turn: its id, its tool, the key that says which calls are
# the same one, and whether it only reads. A plain tuple, not a named one:
# each conversation's checkpoint keeps every call its replay read, and the
# garbage collector stops walking a plain tuple of plain values once it
# has looked at it (a named tuple it walks for as long as it lives, in
# every full collection, holding the GIL).
Call = tuple[str, str | None, bytes, bool]


# Tools that read and change nothing, by their lower-cased names (Claude
# Code's Read, Grep, Glob and LS; the usual names of file readers and
# searches in other agents and MCP servers).
READING_TOOLS = frozenset({
    "read", "read_file", "read_files", "read_text_file", "read_multiple_files",
    "view", "view_file", "open_file", "cat", "grep", "glob", "ls", "list",
    "list_dir", "list_directory", "list_files", "find", "find_files", "search",
    "search_files", "file_search", "codebase_search", "get_file", "get_file_contents",
    "webfetch", "web_fetch", "websearch", "web_search", "fetch",
})
# Shell programs that only read (with no redirection into a file, and sed
# and find without the options that write).
READING_COMMANDS = frozenset({
    "cat", "head", "tail", "less", "more", "ls", "ll", "tree", "find", "grep", "egrep",
    "fgrep", "rg", "ag", "ack", "wc", "nl", "sed", "awk", "sort", "uniq", "cut", "diff",
    "file", "stat", "du", "df", "pwd", "cd", "echo", "printf", "which", "type", "whoami",
    "env", "date", "view", "od", "xxd", "hexdump", "readlink", "realpath", "basename",
    "dirname", "true", "test", "[", "column", "tr", "jq",
})
READING_GIT = frozenset({"status", "diff", "log", "show", "blame", "grep", "ls-files",
                         "rev-parse", "describe", "shortlog"})
# Where a shell line splits into commands; then what writes inside one.
_COMMAND_SEPARATORS = re.compile(r"&&|\|\||[;|\n]")
_WRITING_OPTIONS = frozenset({"-i", "--in-place", "-delete", "-exec", "-execdir", "-fprint"})
_PROGRAMS_THAT_MAY_WRITE = frozenset({"sed", "find", "awk"})
# Names a shell command goes under in the argument objects of the usual
# tools (mini-swe-agent's bash, Codex's shell, Claude Code's Bash...).
_COMMAND_KEYS = ("command", "cmd")


def calls_of(items: Sequence[object], turn: ToolTurn) -> list[Call]:
    """The calls of ``turn`` among the request's items, in their order."""
    wanted = set(turn.call_ids)
    calls: list[Call] = []
    for position in range(turn.location[0], min(turn.last, len(items) - 1) + 1):
        item = items[position]
        if not isinstance(item, dict):
            continue
        for call_id, name, arguments in _raw_calls(item):
            if call_id in wanted:
                wanted.discard(call_id)
                calls.append(_call(call_id, name, arguments))
    return calls


def _raw_calls(item: dict[str, object]) -> list[tuple[str, str | None, object]]:
    """(id, tool, arguments as found) of each call an item holds, whatever
    its wire format."""
    found: list[tuple[str, str | None, object]] = []
    tool_calls = item.get("tool_calls")
    if isinstance(tool_calls, list):  # Chat Completions
        for call in tool_calls:
            if isinstance(call, dict) and isinstance(function := call.get("function"), dict):
                found.append((_text(call.get("id")), _name(function.get("name")),
                              function.get("arguments")))
    content = item.get("content")
    if isinstance(content, list):  # Anthropic Messages
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                found.append((_text(block.get("id")), _name(block.get("name")),
                              block.get("input")))
    kind = item.get("type")
    if isinstance(kind, str) and kind in RESPONSES_CALL_TYPES:  # Responses
        name = _name(item.get("name")) or ("local_shell" if kind == "local_shell_call" else None)
        arguments = next((item[key] for key in ("arguments", "input", "action") if key in item),
                         None)
        found.append((_text(item.get("call_id")), name, arguments))
    return found


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _call(call_id: str, name: str | None, arguments: object) -> Call:
    value = arguments
    if isinstance(arguments, str):
        try:
            value = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            text = arguments.strip().encode("utf-8", "surrogatepass")
            return (call_id, name, _key(name, text), reads_only(name, None))
    canonical = _canonical(value)
    # Arguments no writing can compare (nested past what Python recurses
    # through): a key of the call's own, the same as no other call's.
    key = _key(name, canonical) if canonical is not None else b"\x01" + call_id.encode(
        "utf-8", "surrogatepass")
    return (call_id, name, key, reads_only(name, value))


def _key(name: str | None, arguments: bytes) -> bytes:
    return (name or "").encode("utf-8", "surrogatepass") + b"\x00" + arguments


def _canonical(value: object) -> bytes | None:
    """The arguments written as JSON with sorted keys and no whitespace."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer past 64 bits, a lone surrogate, deep nesting
        pass
    try:
        return repr(value).encode("utf-8", "surrogatepass")
    except RecursionError:
        return None


def reads_only(name: str | None, arguments: object) -> bool:
    """Does the call only read? A known reading tool, or a shell command
    every part of which is a plain read."""
    if name is not None and name.lower() in READING_TOOLS:
        return True
    command = _command(arguments)
    return command is not None and command_reads_only(command)


def _command(arguments: object) -> str | None:
    """The shell line of a call's arguments: a string, or an argv list
    (``["bash", "-lc", "..."]`` reads as its script)."""
    if isinstance(arguments, str):
        return None
    if isinstance(arguments, dict):
        for key in _COMMAND_KEYS:
            if key in arguments:
                return _command_line(arguments[key])
    return None


def _command_line(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        if len(value) >= 3 and value[1] in ("-c", "-lc"):
            return str(value[2])
        return " ".join(str(part) for part in value)
    return None


def command_reads_only(line: str) -> bool:
    """Is every command of a shell line a plain read? Quotes are not parsed:
    a ``>`` or a separator inside them counts, which can only call a read a
    change, never the other way round."""
    if ">" in line and _redirects_into_a_file(line):
        return False
    if "`" in line or "$(" in line:
        return False
    for command in _COMMAND_SEPARATORS.split(line):
        # The program and its first argument decide, but for the programs
        # whose options may write (every option is read for those alone).
        first = command.split(None, 2)
        if not first:
            continue
        program = first[0].rsplit("/", 1)[-1]
        if program == "git":
            if len(first) < 2 or first[1] not in READING_GIT:
                return False
        elif program not in READING_COMMANDS:
            return False
        elif program in _PROGRAMS_THAT_MAY_WRITE and any(
                word in _WRITING_OPTIONS or (program == "sed" and word.startswith("-i"))
                for word in command.split()[1:]):
            return False
    return True


def _redirects_into_a_file(line: str) -> bool:
    """Does a ``>`` of the line write into a file? ``2>&1``, ``>&2`` and
    ``> /dev/null`` write nothing a later call reads; ``>>`` appends."""
    at = line.find(">")
    while at >= 0:
        following = line[at + 1:at + 16]
        if not ((following[:1] == "&" and following[1:2].isdigit())
                or following.lstrip().startswith("/dev/null")):
            return True
        at = line.find(">", at + 1)
    return False
