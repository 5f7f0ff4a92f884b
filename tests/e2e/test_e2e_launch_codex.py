"""End to end: ``obsmask codex`` runs the real Codex CLI (the version the
tests pin) through a proxy of its own, as a user runs it.

The upstream is a scripted Responses server on 127.0.0.1
(tests/support/scripted_responses.py), named the way a user names a
gateway for Codex: ``openai_base_url`` in ``$CODEX_HOME/config.toml``.
Codex itself runs ``codex exec`` cut off from the network
(tests/support/codex.py). Checked, each in its own words below: Codex's
WebSocket upgrade is answered 426 by the proxy and Codex sends HTTP POSTs,
which the proxy masks; the recall tool is registered for the run without
touching Codex's configuration; the exit status is Codex's; the proxy is
gone afterwards, and the run's saving is what obsmask prints last.
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
from support.claude_code import network_trap
from support.codex import (
    HERMETIC_ARGUMENTS,
    MODEL,
    CodexRun,
    codex_environment,
    codex_executable,
    prepare_folder,
)
from support.launcher import (
    LaunchRun,
    alive,
    launch_settings,
    listening,
    obsmask_environment,
    run_obsmask,
)
from support.scripted_responses import ScriptedResponses, scripted_responses

pytestmark = pytest.mark.e2e

PROMPT_MARKER = "OBSMASK-LAUNCH-CODEX"
PROMPT = f"{PROMPT_MARKER}: run the shell steps the model gives you, then report."
COMMANDS = ["seq 1 3000", "seq 3001 6000", "seq 6001 9000"]
FINAL = "Scripted Codex launch done."
PLACEHOLDER = "[Observation masquée: "
RECALL_TOOL = "mcp__obsmask_recall"
# codex exec's hermetic flags but --ignore-user-config: the run reads the
# config.toml that names the upstream, as a user's Codex does.
EXEC_ARGUMENTS = ["exec", *(a for a in HERMETIC_ARGUMENTS if a != "--ignore-user-config"),
                  "--model", MODEL]


@dataclass(frozen=True)
class Launched:
    run: LaunchRun
    server: ScriptedResponses
    config: Path
    config_before: str


@contextmanager
def launched_codex(folder: Path, arguments: list[str]) -> Iterator[Launched]:
    """``obsmask codex --settings S ARGUMENTS`` run to its end, Codex's
    config.toml naming the scripted server, which stays up while the caller
    reads it."""
    codex_executable()
    root = folder / "run"
    work = prepare_folder(root)
    settings = launch_settings(folder)
    with scripted_responses(PROMPT_MARKER, COMMANDS, FINAL) as server, \
            network_trap() as (trap, caught):
        config = root / "home" / ".codex" / "config.toml"
        config.write_text(f'openai_base_url = "{server.url}/v1"\n', encoding="utf-8")
        before = config.read_text(encoding="utf-8")
        env = obsmask_environment(codex_environment(root, trap), NPM_BIN)
        run = run_obsmask(["codex", "--settings", str(settings), *arguments], work, env)
        assert not caught, f"Codex tried to reach another host: {caught}"
        yield Launched(run, server, config, before)


@pytest.fixture(scope="module")
def task_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launched]:
    with launched_codex(tmp_path_factory.mktemp("codex"), [*EXEC_ARGUMENTS, PROMPT]) as run:
        yield run


def task_bodies(server: ScriptedResponses) -> list[dict[str, object]]:
    bodies = [json.loads(served.recorded.body) for served in server.task()]
    assert bodies, "the scripted server saw no request of the task"
    return bodies


def test_obsmask_codex_runs_codex_through_its_own_proxy_which_masks_old_results(
    task_run: Launched,
) -> None:
    run = task_run.run
    assert run.returncode == 0, run.describe()
    codex = CodexRun(run.returncode, run.stdout, run.stderr, 0.0, ())
    assert codex.final_message() == FINAL, run.describe()
    # The proxy forwarded to the base URL of the user's Codex configuration.
    assert run.started is not None, run.describe()
    assert run.started.upstream == f"{task_run.server.url}/v1"
    masked = [PLACEHOLDER in json.dumps(body, ensure_ascii=False)
              for body in task_bodies(task_run.server)]
    assert masked == [False, False, True, True], run.describe()


def test_codexs_websocket_upgrade_is_answered_426_and_codex_sends_http_posts(
    task_run: Launched,
) -> None:
    """Through the proxy, the upgrade never reaches the upstream (which
    would accept it, and obsmask would read nothing)."""
    run = task_run.run
    assert run.started is not None
    assert {(r.method, r.path) for r in task_run.server.server.requests} == {
        ("POST", "/v1/responses")}, run.describe()
    log = run.started.log.read_text(encoding="utf-8")
    assert "GET /v1/responses: WebSocket upgrade answered 426" in log, log[-3000:]


def test_the_recall_tool_is_registered_for_the_run_and_codexs_configuration_is_untouched(
    task_run: Launched,
) -> None:
    assert task_run.run.started is not None and task_run.run.started.recall
    for body in task_bodies(task_run.server):
        tools = body.get("tools")
        assert isinstance(tools, list)
        assert RECALL_TOOL in json.dumps(tools), "the recall tool was not registered"
    assert task_run.config.read_text(encoding="utf-8") == task_run.config_before


def test_the_last_lines_say_what_the_codex_run_saved_and_the_proxy_is_gone(
    task_run: Launched,
) -> None:
    run = task_run.run
    lines = run.obsmask_lines()
    assert lines[-1].startswith("obsmask: the proxy's log: "), lines
    totals = [line for line in lines if line.startswith("obsmask: totals: ")]
    assert totals and totals[0].startswith(
        "obsmask: totals: 4 conversation request(s): 2 masked"), lines
    assert run.started is not None and not run.proxy_left_running
    assert not alive(run.started.pid) and not listening(run.started.port)


def test_the_exit_status_is_codexs(tmp_path: Path) -> None:
    with launched_codex(tmp_path, ["exec", "--no-such-flag-anywhere", "x"]) as launched:
        direct = subprocess.run(
            [str(codex_executable()), "exec", "--no-such-flag-anywhere", "x"],
            capture_output=True, stdin=subprocess.DEVNULL, timeout=60, check=False,
            env=codex_environment(tmp_path / "run", "http://127.0.0.1:9"))
        assert direct.returncode != 0
        assert launched.run.returncode == direct.returncode, launched.run.describe()
        assert not launched.run.proxy_left_running
