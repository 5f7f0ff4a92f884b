"""What reads as an error report for ``keep_errors``
(``conversation/planning/error_heuristic.py``): a marker counts where it says that
something failed (a traceback, a line that starts with an exception or
``error:``, a compiler's error, a network failure, JSON that reports an
error), not where a text merely mentions errors (source code, configuration,
a log that found none)."""

from __future__ import annotations

import json

import pytest

from obsmask_core.conversation.planning.error_heuristic import looks_like_error

PADDING = "ordinary output line\n" * 20

FAILURES = {
    "python traceback": "Traceback (most recent call last):\n  File \"x.py\", line 1\n",
    "exception line": "ValueError: invalid literal for int()",
    "exception name alone on its line": "something went wrong\nConnectionError\n",
    "dotted exception": "java.io.IOException: stream closed",
    "pytest E line": "E       AssertionError: assert 1 == 2",
    "java thread": 'Exception in thread "main" java.lang.NullPointerException',
    "error: line": "error: pathspec 'nope' did not match any file(s) known to git",
    "upper-case ERROR: line": "ERROR: could not install packages",
    "fatal: line": "fatal: not a git repository (or any of the parent directories)",
    "rust error code": "error[E0308]: mismatched types",
    "compiler error": "src/main.c:12:5: error: expected ';' before '}' token",
    "compiler fatal error": "src/main.c:1:10: fatal error: stdio.h: No such file",
    "timed out": "curl: (28) Operation timed out after 30001 milliseconds",
    "connection refused": "psql: could not connect: Connection refused",
    "connect_error": "upstream failed: connect_error",
    "connection reset": "read: Connection reset by peer",
    "ECONNREFUSED": "node: connect ECONNREFUSED 127.0.0.1:5432",
    "ETIMEDOUT": "request failed with ETIMEDOUT",
    "timeout: line": "Timeout: the server did not answer",
    "timeout after line": "timeout after 30 s waiting for the lock",
}

MENTIONS = {
    "class definition": "class ValidationError(Exception):\n    pass\n",
    "raise in source": "    raise ValueError('bad value')\n",
    "except clause": "    except ValueError as error:\n        log(error)\n",
    "error handler names": "def handle_error(self, error):\n    return error.code\n",
    "indented exception line": "    ValueError: indented, so not the end of a traceback",
    "name inside a sentence": "The parser raises ParseError: see the docs.",
    "timeout setting": "[server]\ntimeout = 30\ntimeout=60\nconnect_timeout: 5\n",
    "error counts": "Linting done: 0 errors, 0 warnings\nno errors found\n",
    "log setting": "log_errors = true\nerror_log = /var/log/app.err\n",
    "a name that only starts like an exception": "ErrorHandler: registered\n",
    "an exception name far into a long line": "x" * 250 + "Error: not at the start",
}


@pytest.mark.parametrize("text", FAILURES.values(), ids=FAILURES.keys())
def test_a_failure_report_reads_as_an_error(text):
    assert looks_like_error(text)
    # Anywhere in a longer output, after other lines.
    assert looks_like_error(PADDING + text + "\n" + PADDING)


@pytest.mark.parametrize("text", MENTIONS.values(), ids=MENTIONS.keys())
def test_a_text_that_merely_mentions_errors_is_not_an_error(text):
    assert not looks_like_error(text)
    assert not looks_like_error(PADDING + text + "\n" + PADDING)


@pytest.mark.parametrize(
    "value",
    [{"error": "rate limited"}, {"error": {"code": 429}}, {"error": ["x"]}, {"error": True},
     {"error": 1}, {"status": "error"}, {"status": "ERROR", "data": []}],
)
def test_json_that_reports_an_error_is_an_error(value):
    assert looks_like_error(json.dumps(value))
    assert looks_like_error("  \n" + json.dumps(value, indent=2))


@pytest.mark.parametrize(
    "value",
    [{"error": None}, {"error": False}, {"error": ""}, {"error": {}}, {"error": []},
     {"status": "ok", "errors_seen": 3}, {"data": {"error": "nested, not top level"}},
     [{"error": "a list, not an object"}]],
)
def test_json_that_reports_no_error_is_not_an_error(value):
    """null, false, "", {} and [] are how many APIs say "no error"; only the
    top level of an object counts."""
    assert not looks_like_error(json.dumps(value))


def test_text_that_only_looks_like_json_is_judged_by_its_lines():
    assert not looks_like_error('{"error": "unterminated')
    assert looks_like_error('{"partial": 1\nValueError: boom')
    deep = "{" + '"a": [' * 100_000  # parsing would recurse too deeply
    assert not looks_like_error(deep)
