"""The package as a user installs it: ``pip install .`` from a copy of the
checkout into a new virtual environment (once for the module), then its
``obsmask`` command: in front of a stub provider, from an empty directory
(the recommended settings, and ``obsmask init``'s file), ``--version``, and
``obsmask report`` and ``obsmask measure`` beside the scripts they replace.

The copy holds what git would commit (tracked files and new ones that are not
ignored, as they are in the working tree), so no build output, venv or cache
of the checkout can help the install. pip fetches setuptools and the
dependencies from the package index, as the README's commands do (its cache
keeps this quick). Every process runs on 127.0.0.1 with a bounded time, and
is stopped.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from benchlib.mitmdump import LISTENING
from obsmask_core.conversation.masking.summary import describe_policy
from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values
from obsmask_core.shared.config_file import RECOMMENDED_CONFIG, load_config
from obsmask_core.shared.settings import build
from support.chat import body, conversation
from support.chat_masking import mask_old_tool_results
from support.processes import REPO, START_TIMEOUT, stop_process
from support.recording_server import Answer, recording_server

pytestmark = pytest.mark.e2e

INSTALL_TIMEOUT = 300.0
PLACEHOLDER = "[Observation masquée"


def copy_checkout(destination: Path) -> Path:
    """The files of the checkout that git would commit, copied as they are
    in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True, timeout=60,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the working tree is left out
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def pip_install(checkout: Path, venv: Path) -> Path:
    """A new virtual environment with ``pip install <checkout>``; its bin/."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
         "-q", str(checkout)],
        capture_output=True, text=True, timeout=INSTALL_TIMEOUT, env=isolated_env(),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return venv / "bin"


def isolated_env() -> dict[str, str]:
    """This environment without what could make the new venv's programs
    import the checkout instead of what pip installed."""
    return {name: value for name, value in os.environ.items()
            if name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")} | {"PYTHONUNBUFFERED": "1"}


def installed_top_level(bin_dir: Path) -> set[str]:
    """What the distribution put at the top of site-packages (its RECORD),
    besides its metadata and compiled files."""
    script = (
        "import importlib.metadata as m; "
        "print('\\n'.join(str(f) for f in m.distribution('obsmask').files))"
    )
    files = subprocess.run([str(bin_dir / "python"), "-c", script], capture_output=True,
                           text=True, check=True, timeout=60, env=isolated_env()).stdout
    tops = {Path(line).parts[0] for line in files.splitlines() if line}
    return {top for top in tops if not top.endswith(".dist-info") and top not in
            ("..", "__pycache__")}


def wait_for_port(process: subprocess.Popen[bytes], log: Path) -> int:
    """The port the proxy listens on, once its output says so."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        output = log.read_text(encoding="utf-8", errors="replace")
        match = re.search(LISTENING.pattern, output)
        if match:
            return int(match.group(1))
        assert process.poll() is None, f"obsmask exited with {process.returncode}:\n{output}"
        time.sleep(0.1)
    raise AssertionError(f"obsmask not listening after {START_TIMEOUT:.0f} s:\n"
                         + log.read_text(encoding="utf-8", errors="replace"))


def post(port: int, payload: bytes) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", "/v1/chat/completions", body=payload,
                           headers={"content-type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin/ of a new venv with ``pip install`` of a copy of the checkout."""
    base = tmp_path_factory.mktemp("install")
    started = time.monotonic()
    bin_dir = pip_install(copy_checkout(base / "checkout"), base / "venv")
    print(f"pip install . took {time.monotonic() - started:.1f} s")
    return bin_dir


def start_obsmask(bin_dir: Path, cwd: Path, log: Path, *arguments: str,
                  confdir: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as output:
        return subprocess.Popen(
            [str(bin_dir / "obsmask"), "-p", "0", "--set", f"confdir={confdir}", *arguments],
            cwd=cwd, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
            env=isolated_env(),
        )


def start_up_lines(bin_dir: Path, cwd: Path, tmp_path: Path) -> list[str]:
    """The obsmask lines of a proxy started in ``cwd`` with no option, once it
    listens (then stopped)."""
    log = tmp_path / f"start-{cwd.name}.log"
    process = start_obsmask(bin_dir, cwd, log, confdir=tmp_path / f"conf-{cwd.name}")
    try:
        wait_for_port(process, log)
    finally:
        stop_process(process)
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in text, text
    return [line for line in text.splitlines() if "obsmask: conversation masking" in line]


def test_pip_install_gives_an_obsmask_command_that_masks(tmp_path, installed):
    """pip install . of a copy of the checkout installs obsmask_core and the
    addon script (not fixtures, tests or scripts) and an ``obsmask`` command;
    that command, given mitmdump's arguments, masks the old tool results of a
    request on its way to the stub provider."""
    bin_dir = installed
    assert installed_top_level(bin_dir) == {"obsmask_core", "obsmask.py"}

    # An empty working directory: no mitm.toml, the recommended settings, and
    # the options below (their spec profile: the plain window, here of 1).
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    log = tmp_path / "obsmask.log"
    messages = conversation(turns=3)
    with recording_server(lambda _request: Answer(body=b'{"ok": true}')) as server, \
            open(log, "wb") as output:
        process = subprocess.Popen(
            [str(bin_dir / "obsmask"), "--mode", f"reverse:{server.url}", "-p", "0",
             "--listen-host", "127.0.0.1", "--set", f"confdir={tmp_path}",
             "--set", "obsmask_profile=spec", "--set", "obsmask_window_turns=1"],
            cwd=run_dir, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
            env=isolated_env(),
        )
        try:
            assert post(wait_for_port(process, log), body(messages)) == 200
        finally:
            stop_process(process)
    received = server.posts("/v1/chat/completions")
    assert len(received) == 1
    forwarded = json.loads(received[0].body)["messages"]
    assert forwarded == mask_old_tool_results(messages, MaskPolicy(window_turns=1))
    assert sum(PLACEHOLDER in str(m.get("content")) for m in forwarded) == 2
    text = log.read_text(encoding="utf-8", errors="replace")
    # The addon script came from the new environment, not from the checkout.
    assert "obsmask: conversation masking on: window 1 tool turns" in text, text
    assert str(bin_dir.parent) in text and str(REPO) not in text, text
    assert "Traceback" not in text, text


def test_from_an_empty_directory_obsmask_runs_the_recommended_settings_and_says_so(
        tmp_path, installed):
    empty = tmp_path / "empty"
    empty.mkdir()
    [line] = start_up_lines(installed, empty, tmp_path)
    recommended = build(MaskPolicy, policy_values(load_config(str(RECOMMENDED_CONFIG)), ""))
    assert line.endswith("obsmask: " + describe_policy(
        recommended, "obsmask's recommended settings (no mitm.toml here)")), line
    assert "window 1 tool turns" in line and "price_model=auto" in line


def test_obsmask_init_writes_the_file_that_the_next_start_reads(tmp_path, installed):
    work = tmp_path / "work"
    work.mkdir()
    init = subprocess.run([str(installed / "obsmask"), "init"], cwd=work, capture_output=True,
                          text=True, timeout=60, env=isolated_env())
    assert init.returncode == 0, init.stderr
    written = (work / "mitm.toml").read_text(encoding="utf-8")
    assert written.endswith(RECOMMENDED_CONFIG.read_text(encoding="utf-8"))
    again = subprocess.run([str(installed / "obsmask"), "init"], cwd=work, capture_output=True,
                           text=True, timeout=60, env=isolated_env())
    assert again.returncode == 1 and "--force" in again.stderr
    # An edit of the written file is what the next start runs with.
    (work / "mitm.toml").write_text(written.replace("window_turns = 1\n", "window_turns = 2\n",
                                                    1), encoding="utf-8")
    [line] = start_up_lines(installed, work, tmp_path)
    assert "window 2 tool turns" in line and line.endswith("(settings: mitm.toml)"), line


def test_obsmask_version_names_obsmask_then_mitmproxy(installed):
    result = subprocess.run([str(installed / "obsmask"), "--version"], capture_output=True,
                            text=True, timeout=60, env=isolated_env())
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert lines[0] == f"obsmask: {version}"
    assert lines[1].startswith("Mitmproxy: "), result.stdout


def _without_the_date(page: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "DATE", page)


def test_obsmask_report_and_measure_give_what_the_scripts_give(tmp_path, installed):
    """On the fixtures' flow files, from an empty directory (the recommended
    settings for both): the installed commands and the checkout's scripts
    print the same measurement and write the same page."""
    flows = sorted(str(path) for path in (REPO / "fixtures" / "flows").glob("*.mitm"))
    assert len(flows) == 3
    work = tmp_path / "work"
    work.mkdir()

    def run(command: list[str]) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(command, cwd=work, capture_output=True, text=True,
                                timeout=300, env=isolated_env())
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        return result

    installed_measure = run([str(installed / "obsmask"), "measure", *flows, "--json"])
    script_measure = run([sys.executable, str(REPO / "scripts" / "measure.py"), *flows,
                          "--json"])
    document = json.loads(installed_measure.stdout)
    assert document == json.loads(script_measure.stdout)
    assert document["settings"]["source"] == "obsmask's recommended settings (no mitm.toml here)"

    run([str(installed / "obsmask"), "report", *flows, "-o", "installed.html"])
    run([sys.executable, str(REPO / "scripts" / "report.py"), *flows, "-o", "script.html"])
    pages = [_without_the_date((work / name).read_text(encoding="utf-8"))
             for name in ("installed.html", "script.html")]
    assert pages[0] == pages[1]
    assert "<svg" in pages[0]
