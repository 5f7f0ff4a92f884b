"""Read a JSON-RPC 2.0 text (one message or a batch) and find its long strings.

The text is read by one loop over regular-expression tokens, never by
recursion, so 100 000 levels of nesting cost what they weigh, and it is read
once: O(size of the text). A long string (MCP's tool output: one text of
hundreds of thousands of characters) is read at C speed instead of by the
regular expression, which walks it a character at a time: checked and
decoded by the json module's string reader or orjson (``long_strings``),
its value kept for the cut. The scan validates
the JSON and the JSON-RPC envelope, tells each message's kind (request,
notification, response) and the ``name`` in its ``params`` (the tool of a
tools/call request), and finds the strings in a response's ``result`` and
``error.data`` that are long enough to cut; ``obsmask_core.mcp.cut`` cuts
them.
"""

from __future__ import annotations

import json

from obsmask_core.mcp.json_tokens import TOKEN, SkipRuns, compile_skip_runs
from obsmask_core.mcp.jsonrpc_message import JsonRpcMessage, JsonRpcScan
from obsmask_core.mcp.long_strings import (
    LONG_STRING_CHARS,
    read_long_string,
    token_or_long_string,
)
from obsmask_core.mcp.protected_keys import BINARY_CONTENT_TYPES, PROTECTED_KEYS
from obsmask_core.shared.json_text import skip_whitespace

# The longest string the skip runs (json_tokens.SkipRuns) take in. Runs skip
# strings of at most this many characters (fewer under a smaller max_chars):
# a run that fails (the last member of an object, with no comma after it)
# backtracks through its strings several times, and the token loop reads a
# longer string faster.
SKIP_RUN_CHARS = 2 * LONG_STRING_CHARS
# The one pair of skip runs that serves every max_chars from SKIP_RUN_CHARS
# on, and a scan for no cut at all, compiled once (compiling is slow:
# docs/benchmarks.md).
WIDEST_SKIP_RUNS = compile_skip_runs(SKIP_RUN_CHARS)
_TOKEN_OR_LONG = token_or_long_string(LONG_STRING_CHARS)

# Parser states: what the next token may be. _OPENED_*: just after "{" or
# "[", where the container may also close at once.
_VALUE, _KEY, _COLON, _NEXT, _OPENED_OBJECT, _OPENED_ARRAY = range(6)
# Roles of containers (_PARAMS: a message's "params" object, read for its
# "name").
_PLAIN, _MESSAGE, _ERROR, _BATCH, _PARAMS = range(5)


class _Frame:
    __slots__ = ("data", "eligible", "is_object", "key", "message", "role", "type")

    def __init__(self, is_object: bool, role: int, eligible: bool, message: int) -> None:
        self.is_object = is_object
        self.role = role
        self.eligible = eligible  # strings directly inside may be cut
        self.key: str | None = None  # objects: the member being read
        self.message = message  # index of the enclosing message, -1 outside
        self.type: str | None = None  # objects: the value of their "type" member
        self.data: list[tuple[int, int, int]] = []  # long strings in a "data" member


def _decode_key(raw: str) -> str:
    return raw[1:-1] if "\\" not in raw else str(json.loads(raw))


def skip_runs_for(max_chars: int | None) -> SkipRuns:
    """The skip runs of a scan for the strings over ``max_chars`` (None:
    for none): WIDEST_SKIP_RUNS from SKIP_RUN_CHARS on, else compiled for
    ``max_chars``. A caller that scans many texts at one limit makes them
    once (``tool_limits.ToolLimits``)."""
    if max_chars is None or max_chars >= SKIP_RUN_CHARS:
        return WIDEST_SKIP_RUNS
    return compile_skip_runs(max_chars)


def scan_jsonrpc(text: str, max_chars: int | None = None,
                 runs: SkipRuns | None = None) -> JsonRpcScan:
    """Read ``text`` as one JSON-RPC message or a batch of them, and find the
    strings longer than ``max_chars`` that may be cut (None: find none).
    ``runs``: ``skip_runs_for(max_chars)``, made once by the caller (made
    here when not given).

    A string may be cut when it lies in the ``result`` or ``error.data`` of a
    response, not under a PROTECTED_KEYS member, and is not the ``data`` of an
    image or audio block. Its length is judged on the escaped text first (an
    escaped string is never shorter than its value); cut_string decides on the
    value.
    """
    scan = JsonRpcScan()
    messages = scan.messages
    candidates: list[tuple[int, int, int]] = []
    # The values of the long strings read (start -> value), for the cut.
    values: dict[int, str] = {}
    stack: list[_Frame] = []
    state = _VALUE
    pos = 0
    end_of_text = len(text)
    ascii_text = text.isascii()  # O(1): CPython knows it of every str
    match = _TOKEN_OR_LONG.match
    limit = max_chars if max_chars is not None else end_of_text + 1
    runs = runs or skip_runs_for(max_chars)
    array_run, object_run = runs.array_run, runs.object_run
    top: _Frame | None = None

    while True:
        if top is not None and top.role == _PLAIN:
            if top.is_object:
                if state == _KEY or state == _OPENED_OBJECT:
                    run = object_run.match(text, pos)
                    if run is not None and run.end() > pos:
                        pos, state = run.end(), _KEY
            elif state == _VALUE or state == _OPENED_ARRAY:
                run = array_run.match(text, pos)
                if run is not None and run.end() > pos:
                    pos, state = run.end(), _VALUE
        token = match(text, pos)
        long_value: str | None = None
        if token is not None and token.lastindex == 4:
            start = token.start(4)
            found = read_long_string(text, start, ascii_text)
            if found is not None:
                end, long_value = found
                group = 1
            else:  # TOKEN reads it again, and says where it goes wrong
                token = TOKEN.match(text, pos)
        if token is None:
            if skip_whitespace(text, pos) == end_of_text:
                scan.problem = "not valid JSON (the text ends early)"
            else:
                scan.problem = f"not valid JSON (unexpected text at character {pos})"
            return scan
        if long_value is None:
            group = token.lastindex or 0
            start, end = token.span(group)
        pos = end

        if group == 2:
            char = text[start]
            if char == ":":
                if state != _COLON:
                    scan.problem = f"not valid JSON (unexpected ':' at character {pos - 1})"
                    return scan
                state = _VALUE
                continue
            if char == ",":
                if state != _NEXT or top is None:
                    scan.problem = f"not valid JSON (unexpected ',' at character {pos - 1})"
                    return scan
                state = _KEY if top.is_object else _VALUE
                continue
            if char in "}]":
                closes_object = char == "}"
                if top is None or top.is_object != closes_object or state not in (
                    _NEXT, _OPENED_OBJECT if closes_object else _OPENED_ARRAY
                ):
                    scan.problem = f"not valid JSON (unexpected {char!r} at character {pos - 1})"
                    return scan
                stack.pop()
                if top.data and top.type not in BINARY_CONTENT_TYPES:
                    candidates.extend(top.data)
                state = _NEXT
                if not stack:
                    break
                top = stack[-1]
                continue
            # "{" or "[": a container value opens.
            if state != _VALUE and state != _OPENED_ARRAY:
                scan.problem = f"not valid JSON (unexpected {char!r} at character {pos - 1})"
                return scan
            is_object = char == "{"
            if top is None:
                if is_object:
                    messages.append(JsonRpcMessage())
                    frame = _Frame(True, _MESSAGE, False, len(messages) - 1)
                else:
                    scan.batch = True
                    frame = _Frame(False, _BATCH, False, -1)
            elif top.role == _BATCH:
                if not is_object:
                    scan.problem = "a batch element is not an object"
                    return scan
                messages.append(JsonRpcMessage())
                frame = _Frame(True, _MESSAGE, False, len(messages) - 1)
            else:
                key = top.key
                if top.role == _MESSAGE:
                    message = messages[top.message]
                    if key == "result":
                        message.has_result = True
                        frame = _Frame(is_object, _PLAIN, True, top.message)
                    elif key == "error":
                        message.has_error = True
                        role = _ERROR if is_object else _PLAIN
                        frame = _Frame(is_object, role, False, top.message)
                    elif key == "params" and is_object:
                        frame = _Frame(True, _PARAMS, False, top.message)
                    else:
                        # A container is neither a valid id nor a method name:
                        # the message stays invalid on that account.
                        frame = _Frame(is_object, _PLAIN, False, top.message)
                elif top.role == _ERROR:
                    frame = _Frame(is_object, _PLAIN, key == "data", top.message)
                else:
                    eligible = top.eligible and (key not in PROTECTED_KEYS if top.is_object
                                                 else True)
                    frame = _Frame(is_object, _PLAIN, eligible, top.message)
            stack.append(frame)
            top = frame
            state = _OPENED_OBJECT if is_object else _OPENED_ARRAY
            continue

        # A string, number or literal.
        if state == _KEY or state == _OPENED_OBJECT:
            if group != 1:
                scan.problem = f"not valid JSON (a member name must be a string, at {pos})"
                return scan
            assert top is not None
            top.key = long_value if long_value is not None else _decode_key(text[start:end])
            state = _COLON
            continue
        if state != _VALUE and state != _OPENED_ARRAY:
            scan.problem = f"not valid JSON (unexpected value at character {start})"
            return scan
        state = _NEXT
        if top is None:
            scan.problem = "the JSON is not an object or an array of objects"
            return scan
        if top.role == _BATCH:
            scan.problem = "a batch element is not an object"
            return scan
        key = top.key
        if top.role == _MESSAGE:
            message = messages[top.message]
            if key == "jsonrpc":
                message.jsonrpc_ok = text[start:end] == '"2.0"'
            elif key == "id":
                message.has_id, message.id_text = True, text[start:end]
            elif key == "method":
                message.has_method = group == 1
                message.method = None if group != 1 else (
                    long_value if long_value is not None else _decode_key(text[start:end]))
            elif key == "result":
                message.has_result = True
                if group == 1 and end - start - 2 > limit:
                    candidates.append((start, end, top.message))
                    if long_value is not None:
                        values[start] = long_value
            elif key == "error":
                message.has_error = True
            continue
        if group != 1:
            continue
        if top.role == _PARAMS:
            if key == "name":
                messages[top.message].params_name = (
                    long_value if long_value is not None else _decode_key(text[start:end]))
            continue
        if top.role == _ERROR:
            if key == "data" and end - start - 2 > limit:
                candidates.append((start, end, top.message))
                if long_value is not None:
                    values[start] = long_value
            continue
        if top.is_object and key == "type" and end - start < 64:
            # Recorded for the "data" rule. Any other value is judged below
            # like every string (it may be longer than a small max_chars), but
            # "image" and "audio" stay: cut, the block's data would be cut on
            # a second pass.
            top.type = _decode_key(text[start:end])
            if top.type in BINARY_CONTENT_TYPES:
                continue
        if not top.eligible or end - start - 2 <= limit:
            continue
        if top.is_object and key in PROTECTED_KEYS:
            continue
        if long_value is not None:
            values[start] = long_value
        if top.is_object and key == "data":
            # Cut or not depends on the block's "type", perhaps not read yet.
            top.data.append((start, end, top.message))
            continue
        candidates.append((start, end, top.message))

    if skip_whitespace(text, pos) != end_of_text:
        scan.problem = f"not valid JSON (extra data at character {pos})"
        return scan
    invalid = [m for m in messages if m.kind == "invalid"]
    if invalid or not messages:
        scan.problem = "not a JSON-RPC 2.0 message" if not scan.batch else (
            "the batch holds something that is not a JSON-RPC 2.0 message")
        return scan
    candidates.sort()
    scan.spans = [span for span in candidates if messages[span[2]].kind == "response"]
    scan.values = {span[0]: values[span[0]] for span in scan.spans if span[0] in values}
    return scan
