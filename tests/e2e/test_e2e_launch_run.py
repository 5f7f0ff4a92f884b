"""End to end: ``obsmask run`` with a shell script as the agent, for what
every launched agent shares: the exit status is the program's, signals
reach the program, and the proxy never outlives obsmask, whatever stops
it (the program failing to start, a signal before or during the run,
obsmask itself killed)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from support.launcher import RunningObsmask, alive, obsmask_environment, run_obsmask

pytestmark = pytest.mark.e2e

# Nothing listens there: the program sends nothing through the proxy.
UPSTREAM = ["--upstream", "http://127.0.0.1:9/v1", "--"]
GONE_WITHIN = 10.0
# Exits 7 on SIGTERM or SIGHUP, 5 on SIGINT; says when it is ready for them.
SIGNALLED_PROGRAM = """
import signal, sys, time
for number, status in ((signal.SIGTERM, 7), (signal.SIGHUP, 7), (signal.SIGINT, 5)):
    signal.signal(number, lambda *_, status=status: sys.exit(status))
print("ready", flush=True)
time.sleep(60)
"""


def gone(pid: int) -> bool:
    deadline = time.monotonic() + GONE_WITHIN
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.fixture
def env() -> dict[str, str]:
    return obsmask_environment(os.environ)


def test_the_exit_status_is_the_programs_and_the_proxy_stops_with_it(tmp_path, env):
    run = run_obsmask(["run", *UPSTREAM, "sh", "-c", "exit 42"], tmp_path, env)
    assert run.returncode == 42, run.describe()
    assert run.started is not None and not run.proxy_left_running
    assert run.obsmask_lines()[-1].startswith("obsmask: the proxy's log: ")


def test_the_program_gets_the_proxy_as_its_base_url(tmp_path, env):
    run = run_obsmask(["run", *UPSTREAM, "sh", "-c", 'echo "$OPENAI_BASE_URL"'], tmp_path, env)
    assert run.started is not None
    assert run.stdout.strip() == f"http://127.0.0.1:{run.started.port}/v1"


@pytest.mark.parametrize("sent, status", [(signal.SIGTERM, 7), (signal.SIGHUP, 7),
                                          (signal.SIGINT, 5)])
def test_a_signal_sent_to_obsmask_reaches_the_program_and_the_proxy_still_stops(
    tmp_path, env, sent, status,
):
    """SIGINT too, when obsmask alone gets it (an IDE's stop button): the
    terminal is not there to send it to the program. (The program is Python:
    a shell cannot trap a signal ignored when it started, as SIGHUP is
    under some test runners.)"""
    with RunningObsmask(["run", *UPSTREAM, sys.executable, "-c", SIGNALLED_PROGRAM],
                        tmp_path, env) as running:
        started = running.wait_started()
        deadline = time.monotonic() + 30
        while "ready" not in running.outputs()[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        running.process.send_signal(sent)
        assert running.wait(60) == status, running.outputs()
        assert gone(started.pid)
        assert "obsmask: totals: " in running.outputs()[1]


def test_a_signal_before_the_program_starts_stops_the_proxy(tmp_path, env):
    """Sent as soon as the proxy process exists, while it starts. (The
    program sleeps: should a loaded machine deliver the signal after the
    start, the program gets it and the status is the same.)"""
    with RunningObsmask(["run", *UPSTREAM, "sleep", "60"], tmp_path, env) as running:
        proxy = running.proxy_pid()
        running.process.send_signal(signal.SIGTERM)
        assert running.wait(60) == 128 + signal.SIGTERM
        assert gone(proxy)


def test_a_program_that_cannot_run_leaves_no_proxy(tmp_path, env):
    program = tmp_path / "no_interpreter_line"
    program.write_text("echo hello\n")
    program.chmod(0o755)
    run = run_obsmask(["run", *UPSTREAM, str(program)], tmp_path, env)
    assert run.returncode == 126, run.describe()
    assert run.started is not None and not run.proxy_left_running


def test_obsmask_killed_outright_takes_its_proxy_with_it(tmp_path: Path, env):
    """SIGKILL leaves obsmask no chance: the proxy is told by the system
    (Linux's parent-death signal)."""
    with RunningObsmask(["run", *UPSTREAM, "sleep", "60"], tmp_path, env) as running:
        started = running.wait_started()
        os.killpg(running.process.pid, signal.SIGKILL)
        running.wait(60)
        assert gone(started.pid)


def test_keep_proxy_leaves_the_proxy_running_and_says_how_to_stop_it(tmp_path, env):
    run = run_obsmask(["run", "--keep-proxy", *UPSTREAM, "true"], tmp_path, env)
    assert run.returncode == 0, run.describe()
    assert run.proxy_left_running, "the proxy was not kept"
    assert run.started is not None
    assert f"kill -INT {run.started.pid}" in run.obsmask_lines()[-1]
