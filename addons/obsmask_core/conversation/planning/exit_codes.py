"""Does a tool result report a command that failed by its exit code?
(``keep_errors``, beside ``error_heuristic.py``)

Coding agents that run shell commands tell the model how the command ended
in a line of their own above or below the command's output, or in a member of
the JSON object they send instead. Such a report with an exit code other than
0 is a failure, even when the output holds no error word (``grep`` that finds
nothing, ``cat: missing.txt: No such file or directory``, a test run that
exits 1). A report of exit code 0 is a success and stays maskable.

A text counts only where it has the agent's shape, not where it mentions an
exit code:

- a line counts when the whole line is the report (``Exit code: 1``, not
  ``Exit code 1 means that lint found problems``) and it is one of the first
  or last ``EDGE_LINES`` lines of the result (blank lines around the result
  left out), where the agents put it: a line in the middle of a file, a
  README paragraph, a test asserting ``returncode == 1`` or a script's
  ``exit 1`` is not a report;
- in JSON, only the top-level object's ``"returncode"`` or ``"exit_code"``, or
  the ``"exit_code"`` of its ``"metadata"`` object, counts, and only as an
  integer.
"""

from __future__ import annotations

import re

# How many lines at each end of a result hold the agent's header or footer.
# Codex's exec_command header has its exit line third, after "Chunk ID:" and
# "Wall time:"; OpenHands' and Gemini CLI's footers have theirs at most fourth
# from the end.
EDGE_LINES = 5
_EDGE_CHARS = 2000  # how much of each end of a result holds those lines

_FAILED = r"-?0*[1-9][0-9]*"  # an exit code other than 0
# A whole line (stripped) that reports a failed command.
_EXIT_LINE = re.compile(
    "|".join((
        # Codex, shell tool in freeform mode: "Exit code: 1" first line.
        # Claude Code, Bash tool: "Exit code 1" first line of a failed result.
        # Gemini CLI, shell tool: "Exit Code: 1" after the output.
        rf"exit code(?::[ \t]*|[ \t]+){_FAILED}",
        # Codex, exec_command / write_stdin: "Process exited with code 1" in the header.
        rf"process exited with code {_FAILED}",
        # mini-swe-agent (v1 and v2 XML templates): "<returncode>1</returncode>" first line.
        rf"<returncode>[ \t]*{_FAILED}[ \t]*</returncode>",
        # OpenHands, bash session: "[The command completed with exit code 1.]",
        # with " CTRL+C was sent." when the command was a key.
        rf"\[the command completed with exit code {_FAILED}\.(?: ctrl\+[a-z] was sent\.)?\]",
        # OpenHands, terminal observation: "[Command finished with exit code 1]" last line.
        rf"\[command finished with exit code {_FAILED}\]",
        # OpenHands, Windows PowerShell session: "[Command execution finished.
        # State: ..., Exit Code: 1]" and "[Command execution cancelled ... Exit Code: 1]".
        rf"\[command execution [^\]\n]*exit code: {_FAILED}\]",
        # Go (go run, go test) and shells: "exit status 1" alone on its line.
        rf"exit status {_FAILED}",
    )),
    re.IGNORECASE,
)
# JSON members that hold a command's exit code.
# mini-swe-agent v2 (mini.yaml): {"returncode": 1, "output": ...};
# a command runner's JSON result: {"stdout": ..., "exit_code": 1}.
_TOP_LEVEL_KEYS = ("returncode", "exit_code")
# Codex, shell tool in JSON mode: {"output": ..., "metadata": {"exit_code": 1, ...}}.
_METADATA_KEY = "exit_code"


def _edge_lines(text: str) -> list[str]:
    """The first and the last ``EDGE_LINES`` lines of ``text``, blank lines
    around it left out. Only ``_EDGE_CHARS`` at each end are read (a report
    line is short), so a long result is never copied whole; a line that the
    cut splits is left out."""
    head = text[:_EDGE_CHARS].lstrip().split("\n", EDGE_LINES)
    tail = text[-_EDGE_CHARS:].rstrip().rsplit("\n", EDGE_LINES)
    if len(text) > _EDGE_CHARS:
        head, tail = head[:-1], tail[1:]
    return head[:EDGE_LINES] + tail[-EDGE_LINES:]


def reports_failed_exit(text: str) -> bool:
    """True if a line of the result's header or footer reports a command that
    ended with an exit code other than 0."""
    return any(_EXIT_LINE.fullmatch(line.strip()) for line in _edge_lines(text))


def json_reports_failed_exit(value: dict[str, object]) -> bool:
    """True if a JSON result (its top-level object) reports an exit code other
    than 0: ``"returncode"`` or ``"exit_code"``, or ``"metadata"."exit_code"``."""
    codes = [value.get(key) for key in _TOP_LEVEL_KEYS]
    metadata = value.get("metadata")
    if isinstance(metadata, dict):
        codes.append(metadata.get(_METADATA_KEY))
    return any(isinstance(code, int) and not isinstance(code, bool) and code != 0
               for code in codes)
