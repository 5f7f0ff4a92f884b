"""Does a tool result look like an error? (``keep_errors``)

The usual error markers are ``Traceback``, ``Exception``, ``Error``,
``timeout``, ``connect_error`` and ``connection refused``, and a bare ``Error``
gives false positives. Matched as bare words, they fire on any
source file (``class FooError(Exception):``, ``timeout=30``), and such a file
would then never be masked: on the ten real sessions in ``fixtures/`` the bare
words keep a large share of all results. So each marker is matched where it
means that something *failed*:

- a Python traceback header;
- a line that *starts* with an exception name and a colon, as the last line of
  a traceback does (``ValueError: bad``, ``E   AssertionError: ...`` in pytest,
  ``java.io.IOException: ...``), or Java's ``Exception in thread``;
- a line that starts with ``error:`` / ``fatal:`` (any case), or a compiler's
  ``file:12:5: error:``;
- the network failures ``timed out``, ``connection refused``,
  ``connect_error``, ``connection reset``, ``ECONNREFUSED``, ``ETIMEDOUT``, and
  a line starting with ``timeout:`` / ``timeout after`` (not ``timeout=30``);
- JSON (text starting with ``{``) whose top level has an ``"error"`` that is
  not empty (``null``, ``false``, ``""``, ``{}`` are how many APIs say "no
  error"), or ``"status": "error"``;
- an exit code other than 0 in the header or footer an agent puts around a
  command's output (``Exit code: 1``, ``Process exited with code 1``,
  ``<returncode>1</returncode>``, ``[Command finished with exit code 1]``...)
  or in its JSON (``"returncode": 1``, ``"metadata": {"exit_code": 1}``): the
  shapes and where they count are in ``exit_codes.py``.
"""

from __future__ import annotations

import json
import re

from obsmask_core.conversation.planning.exit_codes import (
    json_reports_failed_exit,
    reports_failed_exit,
)

# The last line of a traceback: a (dotted) exception name at the very start of
# a line, then ":" or the end of the line. Found by its end ("Error" or
# "Exception"), then the line's start is checked: far fewer regex attempts
# than a MULTILINE "^" pattern tried at every character.
_EXCEPTION_NAME_END = re.compile(r"(?:Error|Exception)(?=:|[ \t]*(?:\r?\n|$))")
_EXCEPTION_NAME_HEAD = re.compile(r"(?:E[ \t]+)?(?:[A-Za-z_][\w$]*\.)*[\w$]*")
_LONGEST_EXCEPTION_HEAD = 200
# Markers that start a line; matched on "\n" + the lowered text.
_LINE_START_MARKERS = re.compile(
    r"\n(?:(?:error|fatal)(?:\[[^\]\n]{0,80}\])?:"
    r"|exception in thread\b"
    r"|timeout(?::| after| waiting| expired| exceeded))"
)
_COMPILER_ERROR = re.compile(r":\d+(?::\d+)?:[ \t]*(?:fatal[ \t]+)?error:")
_FAILURE_WORDS = (
    "traceback (most recent call last)",
    "timed out",
    "connection refused",
    "connect_error",
    "connection reset",
    "econnrefused",
    "etimedout",
)


def _has_exception_line(text: str) -> bool:
    line_start = 0
    searched_to = 0
    for match in _EXCEPTION_NAME_END.finditer(text):
        newline = text.rfind("\n", searched_to, match.start())
        if newline >= 0:
            line_start = newline + 1
        searched_to = match.start()
        if match.start() - line_start > _LONGEST_EXCEPTION_HEAD:
            continue
        if _EXCEPTION_NAME_HEAD.fullmatch(text, line_start, match.start()):
            return True
    return False


def _has_failure_marker(text: str) -> bool:
    lowered = text.lower()
    return (
        any(word in lowered for word in _FAILURE_WORDS)
        or _LINE_START_MARKERS.search("\n" + lowered) is not None
        or ("error:" in lowered and _COMPILER_ERROR.search(lowered) is not None)
    )


def _json_says_error(text: str) -> bool:
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return False
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return False  # not JSON after all: the text markers decide
    if not isinstance(value, dict):
        return False
    if json_reports_failed_exit(value):
        return True
    error = value.get("error")
    if error not in (None, False, "", {}, []):
        return True
    status = value.get("status")
    return isinstance(status, str) and status.lower() == "error"


def looks_like_error(text: str) -> bool:
    """True if ``text`` (the text of a tool result) reads as a failure report.

    A result made of several text blocks is judged on their joined text.
    (Each result is judged once per policy: the planner keeps its
    judgements.)
    """
    return (
        reports_failed_exit(text)
        or _has_exception_line(text)
        or _has_failure_marker(text)
        or _json_says_error(text)
    )
