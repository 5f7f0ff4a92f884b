"""Long strings of a JSON-RPC text, read at C speed: MCP's tool output is
one text of hundreds of thousands of characters, which the regular
expression of ``json_tokens.TOKEN`` would walk a character at a time. The
scan (``jsonrpc_scan``) finds where one opens with ``token_or_long_string``
and reads it with ``read_long_string``.
"""

from __future__ import annotations

import re

# The json module's string reader, in C (json.decoder.scanstring, which
# typeshed declares only here).
from _json import scanstring

import orjson

from obsmask_core.mcp.json_tokens import TOKEN

# A string whose closing quote is further than this many characters away is
# a long string: read by read_long_string, not by TOKEN (whose string
# pattern costs a step of the regular-expression engine per character).
LONG_STRING_CHARS = 512
# Escaped quotes looked past with str.find before the json module's reader
# takes the string instead: text that quotes JSON or code holds thousands.
_MAX_ESCAPED_QUOTES = 16


def token_or_long_string(long_chars: int) -> re.Pattern[str]:
    """TOKEN, unless the next token opens a string whose closing quote is
    more than ``long_chars`` characters away: then group 4 is its opening
    quote. The look-ahead walks at most ``long_chars`` characters, so a
    short string costs about twice its length, a long one a constant."""
    ahead = rf'[ \t\n\r]*"(?!(?:[^"\\]|\\.){{0,{long_chars}}}")'
    return re.compile(rf'(?!{ahead}){TOKEN.pattern}|[ \t\n\r]*(")')


def read_long_string(text: str, quote: int, ascii_text: bool) -> tuple[int, str] | None:
    """The end and the value of the string token that opens at ``quote``,
    read at C speed; None when it is no valid JSON string (the caller reads
    it again with TOKEN, which says where it goes wrong).

    The json module's string reader (C, the grammar TOKEN follows) reads it
    in one pass. In an ASCII text (non-ASCII escaped as ``\\uXXXX``, which
    that reader decodes slowly) orjson is faster (docs/benchmarks.md): the
    closing quote is the first one after an even number of backslashes,
    found with str.find, and orjson checks and decodes the token (strict
    JSON too); what it refuses though JSON allows it (an escaped lone
    surrogate), and a text of many escaped quotes, goes to the json
    module's reader.
    """
    if ascii_text:
        end = quote
        for _ in range(_MAX_ESCAPED_QUOTES):
            end = text.find('"', end + 1)
            if end < 0:
                return None
            before = end - 1
            while text[before] == "\\":  # stops at the opening quote at the latest
                before -= 1
            if (end - 1 - before) % 2 == 0:
                try:
                    value = orjson.loads(text[quote : end + 1])
                except orjson.JSONDecodeError:
                    break
                if isinstance(value, str):
                    return end + 1, value
                break
    try:
        value, after = scanstring(text, quote + 1, True)
    except ValueError:
        return None
    return after, value
