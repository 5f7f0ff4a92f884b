"""A command that failed by its exit code reads as an error for
``keep_errors`` (``conversation/planning/exit_codes.py``): an exit code other than 0
in the line or the JSON member where a coding agent reports how a command
ended, not a text that merely mentions exit codes."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from obsmask_core.conversation.planning.error_heuristic import looks_like_error
from obsmask_core.conversation.planning.exit_codes import EDGE_LINES

# The command's own output: no error word, nothing the other rules know.
OUTPUT = "cat: missing_file.txt: No such file or directory"
LONG_OUTPUT = "\n".join(f"line {n}: ordinary output" for n in range(200))
FAILED_CODES = [1, 2, 127, 255]


def _openhands_observation(output: str, code: int) -> str:
    return (f"{output}\n[The command completed with exit code {code}.]\n"
            "[Current working directory: /workspace/project]\n"
            "[Python interpreter: /usr/bin/python]\n"
            f"[Command finished with exit code {code}]")


# Each agent's result for a command that printed ``output`` and ended with ``code``,
# exactly as the agent sends it to the model.
SHAPES: dict[str, Callable[[str, int], str]] = {
    "codex exec_command": lambda output, code: (
        f"Chunk ID: 4f2a1c\nWall time: 0.0512 seconds\nProcess exited with code {code}\n"
        f"Original token count: 12\nOutput:\n{output}"),
    "codex shell, freeform": lambda output, code: (
        f"Exit code: {code}\nWall time: 0.1 seconds\nOutput:\n{output}"),
    "codex shell, json": lambda output, code: json.dumps(
        {"output": output, "metadata": {"exit_code": code, "duration_seconds": 0.1}},
        separators=(",", ":")),
    "mini-swe-agent, xml": lambda output, code: (
        f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>"),
    "mini-swe-agent v2, json": lambda output, code: (
        f'{{\n  "returncode": {code},\n  "output": {json.dumps(output + chr(10))}\n}}'),
    "openhands, bash session": lambda output, code: (
        f"{output}\n[The command completed with exit code {code}.]"),
    "openhands, after a key": lambda output, code: (
        f"{output}\n[The command completed with exit code {code}. CTRL+C was sent.]"),
    "openhands, observation": _openhands_observation,
    "openhands, windows": lambda output, code: (
        f"{output}\n[Command execution finished. State: COMPLETED, Exit Code: {code}]"),
    "claude code bash": lambda output, code: f"Exit code {code}\n{output}",
    "gemini cli shell": lambda output, code: (
        f"Output: {output}\nExit Code: {code}\nProcess Group PGID: 4242"),
    "go run": lambda output, code: f"{output}\nexit status {code}",
}


@pytest.mark.parametrize("code", FAILED_CODES)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_a_command_that_failed_by_its_exit_code_is_an_error(shape, code):
    """An exit code other than 0, where the agent reports how the command
    ended, makes the result an error even when the output holds no error
    word, however long the output."""
    assert looks_like_error(shape(OUTPUT, code))
    assert looks_like_error(shape(LONG_OUTPUT, code))


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_a_command_that_succeeded_is_not_an_error(shape):
    """Exit code 0 in the same place is a success: the result stays
    maskable."""
    assert not looks_like_error(shape(OUTPUT, 0))
    assert not looks_like_error(shape(LONG_OUTPUT, 0))


@pytest.mark.parametrize("line", [
    "exit code: 1", "Exit code 1", "EXIT CODE: 2", "exit status 1", "Exit code: -1",
    "  Process exited with code 137  ", "<returncode>2</returncode>",
])
def test_the_common_report_lines_are_errors_in_any_case(line):
    """The report lines are matched whatever their case and the spaces
    around them, at the start or at the end of a result."""
    assert looks_like_error(f"{line}\n{LONG_OUTPUT}")
    assert looks_like_error(f"{LONG_OUTPUT}\n{line}\n\n")


MENTIONS = {
    "readme paragraph": (
        "## Exit codes\n\n"
        "`lintr check` exits with exit code 0 when every file is clean, with\n"
        "exit code 1 when it found a problem and exit code 2 on a usage error.\n"
        "Exit code 1 is also what CI sees when a check fails.\n"),
    "readme list": "Exit codes:\n\n- 0: success\n- 1: a file failed\n- 127: tool not found\n",
    "pytest file": (
        "def test_missing_file_fails(run):\n"
        "    result = run('cat missing_file.txt')\n"
        "    assert result.returncode == 1\n"
        "    assert 'Exit code: 1' in result.output\n"),
    "shell script": (
        "#!/bin/sh\nif [ ! -f config.toml ]; then\n"
        "    echo 'config.toml is missing' >&2\n    exit 1\nfi\n"),
    "changelog": (
        "## 1.4.0\n\n- `check` now exits with exit code 1 when a file fails.\n"
        "- The runner prints \"Process exited with code 1\" for failed jobs.\n"),
    "log line": "2024-05-01 12:00:03 INFO worker-3 finished, exit code: 1\n",
    "json nested below the top level": json.dumps(
        {"jobs": [{"returncode": 1}], "data": {"exit_code": 2}}),
    "json that is not an integer": json.dumps({"returncode": "1", "exit_code": True}),
}


@pytest.mark.parametrize("text", MENTIONS.values(), ids=MENTIONS.keys())
def test_a_text_that_merely_mentions_exit_codes_is_not_an_error(text):
    """A sentence, an assertion, a script's ``exit 1`` or a log line that
    mentions an exit code is not the agent's report: the whole line must be
    the report, and in JSON only the top level counts."""
    assert not looks_like_error(text)
    assert not looks_like_error(LONG_OUTPUT + "\n" + text + "\n" + LONG_OUTPUT)


@pytest.mark.parametrize("line", [
    "Process exited with code 1", "exit status 1", "<returncode>1</returncode>",
    "[Command finished with exit code 1]",
])
def test_a_report_line_in_the_middle_of_a_file_is_not_an_error(line):
    """A report line counts only among the first or the last lines of a
    result, where the agents put it; in the middle of a file (a saved log, a
    transcript) it is only content."""
    middle = "\n".join(["ordinary line"] * (EDGE_LINES + 1))
    assert not looks_like_error(f"{middle}\n{line}\n{middle}")
    assert looks_like_error(f"{middle}\n{line}")
