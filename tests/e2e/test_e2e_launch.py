"""End to end: ``obsmask claude`` runs the real Claude Code (the version
the tests pin) through a proxy of its own, as a user runs it.

The upstream is a scripted Anthropic server on 127.0.0.1
(tests/support/scripted_anthropic.py), named the way a user's gateway is:
by ``ANTHROPIC_BASE_URL`` in the environment ``obsmask claude`` is started
with. Claude Code itself runs cut off from the network
(tests/support/claude_code.py). Checked, each in its own words below: the
proxy masks what Claude Code sends, Claude Code runs with tool search on
(unless the user chose otherwise) and with the recall tool registered for
the run, the exit status is Claude Code's, the proxy is gone afterwards,
and the run's saving is what obsmask prints last; and, on a
pseudo-terminal, the interactive Claude Code draws its own screen.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.agents import NPM_BIN
from support.claude_code import (
    USER_ID,
    claude_environment,
    claude_executable,
    network_trap,
    prepare_folder,
)
from support.launcher import (
    OBSMASK,
    LaunchRun,
    ProxyStarted,
    alive,
    launch_settings,
    listening,
    obsmask_environment,
    run_obsmask,
    stop_left_over,
)
from support.scripted_anthropic import ScriptedAnthropic, scripted_anthropic
from support.terminal import Terminal

pytestmark = pytest.mark.e2e

PROMPT_MARKER = "OBSMASK-LAUNCH-TASK"
PROMPT = f"{PROMPT_MARKER}: run the shell steps the model gives you, then report."
# The last step shows what Claude Code's environment holds (its shell
# inherits it): the variables obsmask set for the run.
ENVIRONMENT_STEP = "printenv ENABLE_TOOL_SEARCH ANTHROPIC_BASE_URL"
COMMANDS = ["seq 1 3000", "seq 3001 6000", "seq 6001 9000", ENVIRONMENT_STEP]
FINAL = "Scripted launch task done."
PLACEHOLDER = "[Observation masquée: "
RECALL_TOOL = "mcp__obsmask-recall__recall"
CLAUDE_ARGUMENTS = ["--output-format", "json", "--allowedTools", "Bash",
                    "--max-turns", str(len(COMMANDS) + 3), "--strict-mcp-config"]


@dataclass(frozen=True)
class Launched:
    run: LaunchRun
    server: ScriptedAnthropic


@pytest.fixture
def settings_file(tmp_path: Path) -> Path:
    return launch_settings(tmp_path)


# Where the user's Claude Code would send its requests without obsmask.
DIRECT, GATEWAY_IN_ENV, GATEWAY_IN_SETTINGS = "direct", "environment", "settings"


@contextmanager
def launched_claude(root: Path, settings: Path, *, upstream: str = DIRECT,
                    extra_env: dict[str, str] | None = None,
                    arguments: list[str] | None = None) -> Iterator[Launched]:
    """``obsmask claude --settings SETTINGS ARGUMENTS`` run to its end in
    ``root`` (``claude -p`` with the task by default); the scripted server,
    which stays up while the caller reads it, stands for Anthropic's API
    (``DIRECT``: ``--upstream``, Claude Code configured with no base URL)
    or for a gateway the user's Claude Code is configured with, in its
    environment or in its settings file."""
    claude_executable()
    work = prepare_folder(root)
    with scripted_anthropic(PROMPT_MARKER, COMMANDS, FINAL) as server, \
            network_trap() as (trap, caught):
        env = obsmask_environment({**claude_environment(root, server.url, trap),
                                   **(extra_env or {})}, NPM_BIN)
        chosen = ["--upstream", server.url] if upstream == DIRECT else []
        if upstream != GATEWAY_IN_ENV:
            del env["ANTHROPIC_BASE_URL"]
        if upstream == GATEWAY_IN_SETTINGS:
            (root / "home" / ".claude" / "settings.json").write_text(
                json.dumps({"env": {"ANTHROPIC_BASE_URL": server.url}}), encoding="utf-8")
        given = arguments if arguments is not None else ["-p", PROMPT, *CLAUDE_ARGUMENTS]
        run = run_obsmask(["claude", "--settings", str(settings), *chosen, *given], work, env)
        assert not caught, f"Claude Code tried to reach another host: {caught}"
        yield Launched(run, server)


@pytest.fixture(scope="module")
def task_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launched]:
    """The task run once with ``obsmask claude -p`` (several tests read it)."""
    folder = tmp_path_factory.mktemp("launch")
    with launched_claude(folder / "run", launch_settings(folder)) as launched:
        yield launched


def last_result(body: dict[str, object]) -> str:
    """The text of the last tool result of a request."""
    messages = body.get("messages")
    assert isinstance(messages, list)
    for message in reversed(messages):
        content = message.get("content") if isinstance(message, dict) else None
        for block in reversed(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                return json.dumps(block.get("content"), ensure_ascii=False)
    raise AssertionError("no tool result in the request")


def placeholder_in(body: bytes) -> bool:
    return PLACEHOLDER in json.dumps(json.loads(body), ensure_ascii=False)


def bodies(server: ScriptedAnthropic) -> list[dict[str, object]]:
    bodies = [json.loads(served.recorded.body) for served in server.task()]
    assert bodies, "the scripted server saw no request of the task"
    return bodies


def tool_names(body: dict[str, object]) -> list[str]:
    tools = body.get("tools")
    assert isinstance(tools, list)
    return [str(tool.get("name")) for tool in tools if isinstance(tool, dict)]


def test_obsmask_claude_runs_claude_code_through_its_own_proxy_which_masks_old_results(
    task_run: Launched,
) -> None:
    run, server = task_run.run, task_run.server
    assert run.returncode == 0, run.describe()
    assert json.loads(run.stdout)["result"] == FINAL, run.describe()
    assert run.started is not None and run.started.upstream == server.url, run.describe()
    task = [served.recorded.body for served in server.task()]
    assert len(task) == len(COMMANDS) + 1, run.describe()
    # With a window of one tool turn, every request from the third on
    # carries a placeholder; the first two have nothing old enough.
    assert [placeholder_in(body) for body in task] == [False, False, True, True, True], \
        run.describe()


def test_claude_code_runs_with_tool_search_on_and_the_recall_tool_deferred(
    task_run: Launched,
) -> None:
    run = task_run.run
    assert run.returncode == 0, run.describe()
    assert run.started is not None and run.started.recall
    # Claude Code got the variable, and its base URL is the proxy's.
    shown = last_result(bodies(task_run.server)[-1])
    assert f"true\\nhttp://127.0.0.1:{run.started.port}" in shown, shown
    for body in bodies(task_run.server):
        names = tool_names(body)
        # Tool search on: Claude Code sends its search tool, and the MCP
        # tools (the recall tool registered for this run) only by name.
        assert "ToolSearch" in names, names
        assert RECALL_TOOL not in names, names
        assert RECALL_TOOL in json.dumps(body), "the recall tool was not registered"


def test_the_last_lines_say_what_the_run_saved_and_where_the_log_is(
    task_run: Launched,
) -> None:
    run = task_run.run
    assert run.returncode == 0, run.describe()
    lines = run.obsmask_lines()
    assert lines[-1].startswith("obsmask: the proxy's log: "), lines
    totals = [line for line in lines if line.startswith("obsmask: totals: ")]
    assert totals and totals[0].startswith(
        "obsmask: totals: 5 conversation request(s): 3 masked"), lines
    assert run.started is not None and not run.proxy_left_running
    assert not alive(run.started.pid) and not listening(run.started.port)


@pytest.mark.parametrize("where", [GATEWAY_IN_ENV, GATEWAY_IN_SETTINGS])
def test_a_gateway_claude_code_is_configured_with_is_the_upstream_and_the_run_is_masked(
    tmp_path: Path, settings_file: Path, where: str,
) -> None:
    """Its settings file wins over its environment, and obsmask's
    --settings over both; tool search stays as Claude Code has it behind
    that gateway."""
    with launched_claude(tmp_path / "run", settings_file, upstream=where) as launched:
        run = launched.run
        assert run.returncode == 0, run.describe()
        assert run.started is not None and run.started.upstream == launched.server.url
        task = [served.recorded.body for served in launched.server.task()]
        assert [placeholder_in(body) for body in task] == [False, False, True, True, True], \
            run.describe()
        shown = last_result(bodies(launched.server)[-1])
        assert shown.startswith(f'"Exit code 1\\nhttp://127.0.0.1:{run.started.port}'), shown


def test_a_users_own_choice_of_tool_search_is_kept(
    tmp_path: Path, settings_file: Path,
) -> None:
    with launched_claude(tmp_path / "run", settings_file,
                         extra_env={"ENABLE_TOOL_SEARCH": "false"}) as launched:
        assert launched.run.returncode == 0, launched.run.describe()
        shown = last_result(bodies(launched.server)[-1])
        assert shown.startswith('"false\\n'), shown
        for body in bodies(launched.server):
            names = tool_names(body)
            assert "ToolSearch" not in names and RECALL_TOOL in names, names


def test_the_exit_status_is_claude_codes_and_the_proxy_is_gone_afterwards(
    tmp_path: Path, settings_file: Path,
) -> None:
    with launched_claude(tmp_path / "run", settings_file,
                         arguments=["--no-such-option-anywhere"]) as launched:
        run = launched.run
        direct = subprocess.run(
            [str(claude_executable()), "--no-such-option-anywhere"], capture_output=True,
            env=claude_environment(tmp_path / "run", launched.server.url, "http://127.0.0.1:9"),
            stdin=subprocess.DEVNULL, timeout=60, check=False)
        assert direct.returncode != 0
        assert run.returncode == direct.returncode, run.describe()
        # Claude Code's own refusal, on the same terminal.
        assert "no-such-option-anywhere" in run.stderr, run.describe()
        assert run.started is not None, run.describe()
        assert not run.proxy_left_running, "the proxy was still running after obsmask exited"
        assert not listening(run.started.port)


def test_an_interactive_run_shows_claude_codes_own_screen_and_then_the_saving(
    tmp_path: Path, settings_file: Path,
) -> None:
    root = tmp_path / "interactive"
    claude_executable()
    work = prepare_folder(root)
    # What a user who has used Claude Code before has said once: onboarding
    # done, this folder trusted, the API key of the environment approved.
    (root / "home" / ".claude" / ".claude.json").write_text(json.dumps({
        "userID": USER_ID, "hasCompletedOnboarding": True, "theme": "dark",
        "customApiKeyResponses": {"approved": ["test"], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True,
                                 "hasCompletedProjectOnboarding": True}},
    }), encoding="utf-8")
    with scripted_anthropic(PROMPT_MARKER, COMMANDS[:1], FINAL) as server, \
            network_trap() as (trap, _):
        env = obsmask_environment({**claude_environment(root, server.url, trap),
                                   "TERM": "xterm-256color"}, NPM_BIN)
        terminal = Terminal([*OBSMASK, "claude", "--settings", str(settings_file),
                             "--allowedTools", "Bash"], work, env)
        try:
            assert terminal.wait_for(r"❯", 60), terminal.plain()[-3000:]
            terminal.type(PROMPT)
            assert terminal.wait_for(FINAL.replace(" ", ""), 60), terminal.plain()[-3000:]
            terminal.type("/exit")
            assert terminal.wait_exit(60) == 0, terminal.plain()[-3000:]
        finally:
            terminal.close()
            started = ProxyStarted.read(terminal.plain())
            left_running = stop_left_over(started)
    screen = terminal.plain()
    assert started is not None, screen[-3000:]
    assert "ClaudeCode" in terminal.text(), "Claude Code's own screen was not drawn"
    assert "obsmask: totals: 2 conversation request(s)" in screen, screen[-3000:]
    assert not left_running
