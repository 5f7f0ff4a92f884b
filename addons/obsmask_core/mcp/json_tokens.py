"""The regular expressions the JSON-RPC scan reads a text with: one JSON
token at a time, and whole runs of array elements or object members that
cannot hold a string long enough to cut, skipped in one match.

They follow the JSON grammar (RFC 8259): a string is quoted, without raw
control characters, with only the escapes JSON allows; a number has no
leading zero and no lone decimal point.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_STRING = r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"'
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
# One token after optional whitespace. Groups: 1 string, 2 punctuation,
# 3 number or literal.
TOKEN = re.compile(rf"[ \t\n\r]*(?:({_STRING})|([{{}}\[\]:,])|({_NUMBER}|true|false|null))")


@dataclass(frozen=True)
class SkipRuns:
    """Patterns that skip, in one match, a run of array elements or object
    members (each followed by a comma) that cannot hold a string to cut:
    strings of at most ``limit`` characters (without escapes), numbers,
    literals, and containers of those two levels deep. Dense data (a table
    of numbers, a list of file records) then costs regular-expression time,
    not a Python step per token. Compiled once by whoever knows the limit
    (``compile_skip_runs``), and handed to each scan.
    """

    limit: int
    array_run: re.Pattern[str]
    object_run: re.Pattern[str]


def compile_skip_runs(limit: int) -> SkipRuns:
    """The skip runs for strings of at most ``limit`` characters."""
    ws = r"[ \t\n\r]*"
    # A character class repeats at C speed. A string without escapes is one
    # run of at most ``limit``; one with up to 7 escapes (a path, a line
    # end) is at most 8 runs of ``segment``, so that it never exceeds
    # ``limit`` characters either. Others go through the loop.
    plain = r'[^"\\\x00-\x1f]'
    escape = r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})'
    short = f'"{plain}{{0,{limit}}}"'
    if limit >= 15:
        segment = (limit - 7) // 8
        short = (f'(?:{short}|"{plain}{{0,{segment}}}'
                 f'(?:{escape}{plain}{{0,{segment}}}){{1,7}}")')
    scalar = f"(?:{short}|{_NUMBER}|true|false|null)"

    def containers(value: str) -> tuple[str, str]:
        member = f"{short}{ws}:{ws}{value}"
        flat_object = rf"\{{{ws}(?:{member}(?:{ws},{ws}{member})*{ws})?\}}"
        flat_array = rf"\[{ws}(?:{value}(?:{ws},{ws}{value})*{ws})?\]"
        return flat_object, flat_array

    # Two levels: records such as {"path": "...", "tags": ["py", "cli"]}.
    inner = "(?:{}|{}|{})".format(scalar, *containers(scalar))
    element = "(?:{}|{}|{})".format(scalar, *containers(inner))
    array_run = re.compile(f"(?:{ws}{element}{ws},)+")
    # A "type" member is read by the token loop: it decides whether a long
    # "data" member later in the same object is cut.
    object_run = re.compile(f'(?:{ws}(?!"type"{ws}:){short}{ws}:{ws}{element}{ws},)+')
    return SkipRuns(limit, array_run, object_run)
