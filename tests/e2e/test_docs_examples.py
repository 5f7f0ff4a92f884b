"""Every code example of the docs (README.md and docs/) runs, or says why not.

A fenced block of ``sh`` or ``python`` is preceded by a marker, an HTML
comment on the line before its fence (docs/contributing.md, "Tests"):

- ``<!-- example: proxy check=NAME -->``: a shell recipe. Its
  ``python3 scripts/proxy.py`` lines are started for real (the upstream of
  ``--mode reverse:`` swapped for a local stub, every port of the block for
  a free one, ``HOME`` a folder of the test's, so ``~/.mitmproxy`` is too),
  its other lines run in bash (``export``...), and the check sends what a
  client would to the address the recipe gives: ``chat``, ``responses``
  and ``anthropic`` a request that obsmask's totals must count as a
  conversation request; ``mcp`` and ``gateway`` the real ``mcp`` client
  against a real ``mcp`` SDK server whose long answer must arrive cut;
  ``recall`` a ``tools/list`` that must name ``recall``; ``listening``
  only that the proxy (or mitmweb) listens, and that the files the
  recipe's exports name exist.
- ``<!-- example: offline -->``: run in bash in a folder holding flow files
  recorded from fixtures/flows/ (``session.mitm``, ``recorded.mitm``,
  ``day1.mitm``, ``day2.mitm``), ``python3`` being the tests' Python.
- ``<!-- example: python proxy=reverse|recall|gateway [path=P] -->``: run
  under the clients' Python (``OBSMASK_CLIENTS_PYTHON``: the real
  ``openai``, ``anthropic`` and ``mcp`` SDKs) against a real mitmdump
  started here, ``http://127.0.0.1:NNNN`` in the snippet swapped for its
  address; ``reverse`` is in front of a stub provider that must receive the
  request on ``path``.
- ``<!-- example: launch -->``: ``obsmask claude ...`` / ``obsmask codex
  ...`` lines, each run with the checkout's ``obsmask`` command and the real
  agent the tests pin (tests/support/claude_code.py, codex.py), its upstream
  a scripted model server of the test's: it must exit 0 and print the
  run's totals.
- ``<!-- not run: REASON -->``: left out, and why.

``toml`` blocks need no marker: each must be a settings file with which
mitmdump and obsmask start (a wrong key or value stops it before it
listens). ``json`` blocks must parse. The languages of ``NOT_PROGRAMS``
are outputs and other programs' files. Every process is bounded in time
and stopped by its own handle.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.agents import CLIENTS, CLIENTS_PYTHON, NPM_BIN, client_env, needs_clients
from support.claude_code import claude_environment, claude_executable, network_trap
from support.claude_code import prepare_folder as prepare_claude_folder
from support.codex import codex_environment, codex_executable
from support.codex import prepare_folder as prepare_codex_folder
from support.launcher import LaunchRun, obsmask_environment, run_obsmask
from support.mcp_servers import McpServer, start_mcp_server
from support.processes import REPO, running_mitmdump, stop_process
from support.recording_server import Answer, Recorded, RecordingServer, recording_server
from support.scripted_anthropic import scripted_anthropic
from support.scripted_responses import scripted_responses

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
NOT_PROGRAMS = {
    "": "a diagram or an output",
    "text": "an output or a message, shown",
    "yaml": "another program's configuration (Prometheus)",
    "nginx": "another program's configuration",
    "haproxy": "another program's configuration",
    "promql": "Prometheus queries",
}
CHECKS = {"chat", "responses", "anthropic", "mcp", "gateway", "recall", "listening"}
PYTHON_PROXIES = {"reverse", "recall", "gateway"}
FENCE = re.compile(r"^(\s*)```(\w*)(.*)$")
MARKER = re.compile(r"^<!-- (example|not run): (.*?) -->$")
LOCAL_PORT = re.compile(r"127\.0\.0\.1:(\d{4,5})")
MCP_SERVER_PORT = "8004"  # the recipes' MCP server, swapped for a real one
START_TIMEOUT = 90.0
RUN_TIMEOUT = 120.0
FLOW_FILES = {"session.mitm": "chat_session.mitm", "recorded.mitm": "chat_session.mitm",
              "day1.mitm": "chat_session.mitm", "day2.mitm": "anthropic_session.mitm"}

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the fence, 1-based
    language: str
    code: str
    marker: str | None  # "example" or "not run"
    words: str  # what follows the marker's colon

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def options(self) -> dict[str, str]:
        parts = self.words.split()
        return dict(part.split("=", 1) for part in parts[1:] if "=" in part)

    @property
    def kind(self) -> str:
        return self.words.split()[0] if self.words.split() else ""


def blocks_of(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, language = fence.group(1), fence.group(2)
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        code = "\n".join(line.removeprefix(indent) for line in lines[i + 1:end])
        marker = MARKER.match(lines[i - 1].strip()) if i else None
        found.append(Block(page, i + 1, language, code + "\n",
                           marker.group(1) if marker else None,
                           marker.group(2).strip() if marker else ""))
        i = end + 1
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks_of(page)]


def examples(kind: str) -> list[Block]:
    return [b for b in ALL_BLOCKS if b.marker == "example" and b.kind == kind]


def by_name(blocks: list[Block]) -> list[object]:
    return [pytest.param(block, id=block.name) for block in blocks]


# Every block is accounted for ---------------------------------------------------------


def test_every_code_block_of_the_docs_is_run_or_names_why_not():
    problems = []
    for block in ALL_BLOCKS:
        if block.marker == "not run":
            if len(block.words) < 10:
                problems.append(f"{block.name}: 'not run' needs its reason")
        elif block.marker == "example":
            if block.kind == "proxy" and block.options.get("check") not in CHECKS:
                problems.append(f"{block.name}: proxy check= one of {sorted(CHECKS)}")
            elif block.kind == "python" and block.options.get("proxy") not in PYTHON_PROXIES:
                problems.append(f"{block.name}: python proxy= one of {sorted(PYTHON_PROXIES)}")
            elif block.kind not in ("proxy", "offline", "python", "launch"):
                problems.append(f"{block.name}: unknown example kind {block.kind!r}")
        elif block.language not in NOT_PROGRAMS and block.language not in ("toml", "json"):
            problems.append(f"{block.name}: a ```{block.language} block with no marker "
                            "(<!-- example: ... --> or <!-- not run: REASON -->)")
    assert not problems, "\n".join(problems)


def test_the_docs_have_examples_of_every_kind():
    """The collection itself must find them: a marker the parser misses
    would make every example silently skip."""
    assert len(examples("proxy")) >= 8
    assert len(examples("offline")) >= 3
    assert {shlex.split(line)[1] for b in examples("launch") for line in launch_lines(b)} == \
        {"claude", "codex"}
    python = examples("python")
    assert {b.options["proxy"] for b in python} == PYTHON_PROXIES
    sources = "".join(b.code for b in python)
    for sdk in ("from openai import", "from anthropic import", "from mcp import"):
        assert sdk in sources


@pytest.mark.parametrize("block", by_name([b for b in ALL_BLOCKS if b.language == "json"]))
def test_a_json_block_of_the_docs_parses(block: Block):
    json.loads(block.code)


# Helpers ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def provider(recorded: Recorded) -> Answer:
    """A stub provider: a minimal answer of each API, as JSON."""
    path = recorded.path.split("?")[0]
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    if path.endswith("/chat/completions"):
        body: object = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
                        "model": "m", "usage": usage,
                        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                     "message": {"role": "assistant", "content": "hello"}}]}
    elif path.endswith("/responses"):
        body = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m",
                "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto",
                "tools": [], "output": [{"type": "message", "id": "msg_1", "role": "assistant",
                                         "status": "completed",
                                         "content": [{"type": "output_text", "text": "hello",
                                                      "annotations": []}]}],
                "usage": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}
    elif path.endswith("/v1/messages"):
        body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
                "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 2}}
    else:
        return Answer(status=404, body=b'{"error": {"message": "not found"}}')
    return Answer(body=json.dumps(body).encode())


def conversation(kind: str) -> tuple[str, dict[str, object]]:
    """The path (after the base URL) and body of a request with tool results."""
    if kind == "chat":
        messages: list[object] = [{"role": "user", "content": "Fix the bug."}]
        for n in range(3):
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{n}", "type": "function",
                 "function": {"name": "bash", "arguments": "{}"}}]})
            messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": "x" * 3000})
        return "/chat/completions", {"model": "m", "messages": messages}
    if kind == "responses":
        items: list[object] = [{"role": "user", "content": "Fix the bug."}]
        for n in range(3):
            items.append({"type": "function_call", "call_id": f"call_{n}", "name": "bash",
                          "arguments": "{}"})
            items.append({"type": "function_call_output", "call_id": f"call_{n}",
                          "output": "x" * 3000})
        return "/responses", {"model": "m", "input": items}
    turns: list[object] = [{"role": "user", "content": "Fix the bug."}]
    for n in range(3):
        turns.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{n}", "name": "bash", "input": {}}]})
        turns.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "x" * 3000}]})
    return "/v1/messages", {"model": "m", "max_tokens": 10, "messages": turns}


def fetch(url: str, body: object | None = None, headers: dict[str, str] | None = None) -> bytes:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={
        "content-type": "application/json", **(headers or {})})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as answer:
        content: bytes = answer.read()
        return content


def counted_requests(proxy: str) -> dict[str, object]:
    """The proxy's totals of conversation requests, once it counted one (a
    flow is counted just after its answer ended)."""
    deadline = time.monotonic() + 10
    while True:
        totals = json.loads(fetch(f"{proxy}/obsmask/totals"))
        requests: dict[str, object] = totals["requests"]
        if requests["requests"] or time.monotonic() > deadline:
            return requests
        time.sleep(0.1)


def python_shim(folder: Path) -> dict[str, str]:
    """An environment whose ``python3`` is the tests' Python, ``HOME`` is
    ``folder`` and no proxy variable is set."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = client_env()
    env.update(HOME=str(folder), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
               PYTHONUNBUFFERED="1", NO_MKDOCS_2_WARNING="1")
    return env


def work_folder(tmp_path: Path) -> Path:
    """A folder as a user's: the shipped mitm.toml, ``scripts`` and flow files."""
    shutil.copy(REPO / "mitm.toml", tmp_path / "mitm.toml")
    (tmp_path / "scripts").symlink_to(REPO / "scripts")
    for name, fixture in FLOW_FILES.items():
        shutil.copy(REPO / "fixtures" / "flows" / fixture, tmp_path / name)
    return tmp_path


@contextmanager
def started(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> Iterator[Path]:
    """A long-running command of a recipe, until it says it listens; then stopped."""
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while "listening at" not in log.read_text(encoding="utf-8", errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{shlex.join(command)} did not start:\n{log.read_text()}")
            time.sleep(0.2)
        yield log
    finally:
        stop_process(process)


def mcp_server(tmp_path: Path) -> McpServer:
    server = start_mcp_server(CLIENTS / "mcp_server.py", ["--json-response"], "docs",
                              tmp_path / "mcp-server.log")
    server.wait_until_listening()
    return server


def run_mcp_client(url: str) -> str:
    assert CLIENTS_PYTHON is not None
    done = subprocess.run([CLIENTS_PYTHON, str(CLIENTS / "mcp_client.py"), "--url", url],
                          cwd=REPO, env=client_env(), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


# Shell recipes ------------------------------------------------------------------------


@pytest.mark.parametrize("block", by_name(examples("proxy")))
def test_a_shell_recipe_of_the_docs_works_against_local_stubs(block: Block, tmp_path: Path):
    check = block.options["check"]
    if check in ("mcp", "gateway") and not CLIENTS_PYTHON:
        pytest.skip("OBSMASK_CLIENTS_PYTHON is not set (run the tests with scripts/test.py)")
    folder = work_folder(tmp_path)
    env = python_shim(folder)
    code = block.code
    with ExitStack() as stack:
        stub: RecordingServer = stack.enter_context(recording_server(provider))
        upstream = stub.url
        if check in ("mcp", "gateway"):
            server = mcp_server(tmp_path)
            stack.callback(server.stop)
            upstream = f"http://127.0.0.1:{server.port}"
            code = code.replace(f"http://127.0.0.1:{MCP_SERVER_PORT}", upstream)
        # Picked once the servers listen: a port picked before could be the
        # one the system then gives a server (it happened), and the recipe's
        # proxy would not start.
        ports = {port: str(free_port()) for port in set(LOCAL_PORT.findall(block.code))
                 | set(re.findall(r"(?:-p|--web-port) (\d+)", block.code))
                 if port != MCP_SERVER_PORT}
        code = re.sub(r"reverse:\S+", f"reverse:{upstream}", code)
        for old, new in ports.items():
            code = re.sub(rf"(?<=[:\s]){old}\b", new, code)
        shell: list[str] = []
        for n, line in enumerate(code.splitlines()):
            if line.startswith("python3 scripts/proxy.py"):
                command = [sys.executable, str(REPO / "scripts" / "proxy.py"),
                           *shlex.split(line, comments=True)[2:]]
                if "mitmweb" in command:
                    command += ["--set", "web_open_browser=false"]
                if not re.search(r"(?:^|\s)(?:-p|--listen-port)\s", line):
                    # A recipe that keeps mitmproxy's own port (8080) must not
                    # need it free on the machine that runs the tests.
                    command += ["--listen-port", str(free_port())]
                stack.enter_context(started(command, folder, env, tmp_path / f"proxy{n}.log"))
            else:
                shell.append(line)
        done = subprocess.run(["bash", "-c", "set -e\n" + "\n".join(shell) + "\nenv -0"],
                              cwd=folder, env=env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, check=False)
        assert done.returncode == 0, done.stderr
        exported = dict(item.split("=", 1) for item in done.stdout.split("\0") if "=" in item)
        port = next(iter(ports.values()))
        proxy = f"http://127.0.0.1:{port}"
        if check in ("chat", "responses", "anthropic"):
            base = {"chat": exported.get("OPENAI_BASE_URL", f"{proxy}/v1"),
                    "responses": exported.get("OPENAI_BASE_URL", f"{proxy}/v1"),
                    "anthropic": exported.get("ANTHROPIC_BASE_URL", proxy)}[check]
            path, body = conversation(check)
            fetch(base + path, body)
            assert stub.requests, "the stub received nothing"
            assert stub.requests[-1].path.endswith(path.rsplit("/", 1)[-1])
            counted = counted_requests(proxy)
            assert (counted["requests"], counted["passed_through"]) == (1, 0), counted
        elif check in ("mcp", "gateway"):
            path = "/mcp" if check == "mcp" else "/api/mcp-gateway/fast-filesystem/rpc"
            assert "OBSMASK_TRUNCATED" in run_mcp_client(proxy + path)
        elif check == "recall":
            answer = fetch(f"{proxy}/obsmask/mcp",
                           {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                           {"accept": "application/json, text/event-stream"})
            assert b'"recall"' in answer
        else:
            named = [Path(v) for v in exported.values() if "/.mitmproxy/" in v]
            deadline = time.monotonic() + 10  # written as the proxy starts
            while not all(path.exists() for path in named) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert all(path.exists() for path in named), named


@pytest.mark.parametrize("block", by_name(examples("offline")))
def test_an_offline_recipe_of_the_docs_runs_on_recorded_flows(block: Block, tmp_path: Path):
    folder = work_folder(tmp_path)
    done = subprocess.run(["bash", "-c", "set -e\n" + block.code], cwd=folder,
                          env=python_shim(folder), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT * 2, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for written in re.findall(r"(?:-w|-o) (\S+)", block.code):
        assert (folder / written).stat().st_size > 0, written


# Python snippets ----------------------------------------------------------------------


@needs_clients
@pytest.mark.parametrize("block", by_name(examples("python")))
def test_a_python_example_of_the_docs_runs_through_a_real_mitmdump(block: Block,
                                                                   tmp_path: Path):
    assert CLIENTS_PYTHON is not None
    kind = block.options["proxy"]
    empty = tmp_path / "empty.toml"
    empty.write_text("", encoding="utf-8")
    arguments = ["--set", f"obsmask_config={empty}"]
    with ExitStack() as stack:
        stub: RecordingServer = stack.enter_context(recording_server(provider))
        if kind == "reverse":
            arguments += ["--mode", f"reverse:{stub.url}"]
        elif kind == "recall":
            arguments += ["--set", "obsmask_recall_enabled=true",
                          "--set", f"obsmask_recall_data_dir={tmp_path / 'recall'}"]
        else:
            server = mcp_server(tmp_path)
            stack.callback(server.stop)
            arguments += ["--set", f"mcpmask_gateway_servers=fast-filesystem={server.url}"]
        proxy = stack.enter_context(running_mitmdump(arguments, tmp_path, tmp_path / "conf"))
        source = LOCAL_PORT.sub(f"127.0.0.1:{proxy.port}", block.code)
        assert source != block.code, "the snippet names no local address to swap"
        script = tmp_path / "example.py"
        script.write_text(source, encoding="utf-8")
        env = {**client_env(), "OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-test"}
        done = subprocess.run([CLIENTS_PYTHON, str(script)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
        assert done.returncode == 0, f"{done.stderr}\nmitmdump:\n{proxy.tail(40)}"
        if kind == "reverse":
            assert [r.path for r in stub.requests] == [block.options["path"]]
            assert "hello" in done.stdout
        elif kind == "recall":
            assert "['recall']" in done.stdout and "[obsmask-recall id=toolu_01X " in done.stdout
        else:
            assert "big_text" in done.stdout


# Settings files -----------------------------------------------------------------------


@pytest.mark.parametrize("block", by_name([b for b in ALL_BLOCKS
                                           if b.language == "toml" and b.marker is None]))
def test_a_settings_file_of_the_docs_starts_the_proxy(block: Block, tmp_path: Path):
    settings = tmp_path / "mitm.toml"
    settings.write_text(block.code, encoding="utf-8")
    with running_mitmdump(["--set", f"obsmask_config={settings}"], tmp_path,
                          tmp_path / "conf") as proxy:
        assert proxy.port > 0


# obsmask claude / obsmask codex --------------------------------------------------------


def launch_lines(block: Block) -> list[str]:
    """The commands of a launch block (comments and blank lines left out)."""
    lines = [line.split(" #", 1)[0].strip() for line in block.code.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def run_launch_line(line: str, tmp_path: Path) -> LaunchRun:
    """``obsmask AGENT ...`` as the docs write it, the agent's upstream a
    scripted server, everything else as the agent's own tests run it."""
    arguments = shlex.split(line)
    assert arguments[0] == "obsmask" and arguments[1] in ("claude", "codex"), line
    root = tmp_path / arguments[1]
    if arguments[1] == "claude":
        claude_executable()
        work = prepare_claude_folder(root)
        with scripted_anthropic("(no task)", [], "done") as server, \
                network_trap() as (trap, caught):
            env = obsmask_environment(claude_environment(root, server.url, trap), NPM_BIN)
            run = run_obsmask(arguments[1:], work, env)
            assert server.others(), "the scripted model got no request"
            assert not caught, f"Claude Code tried to reach another host: {caught}"
            return run
    codex_executable()
    work = prepare_codex_folder(root)
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=30)
    # As the docs write it, Codex also syncs its plugins and sends analytics
    # (tests/support/codex.py): the trap refuses them, and the run goes on.
    with scripted_responses("(no task)", [], "done") as codex_server, \
            network_trap() as (trap, _):
        (root / "home" / ".codex" / "config.toml").write_text(
            f'openai_base_url = "{codex_server.url}/v1"\n', encoding="utf-8")
        env = obsmask_environment(codex_environment(root, trap), NPM_BIN)
        run = run_obsmask(arguments[1:], work, env)
        assert codex_server.others(), "the scripted model got no request"
        return run


@pytest.mark.parametrize("block", by_name(examples("launch")))
def test_a_launch_example_of_the_docs_runs_the_real_agent_through_its_own_proxy(
    block: Block, tmp_path: Path,
):
    for number, line in enumerate(launch_lines(block)):
        run = run_launch_line(line, tmp_path / str(number))
        assert run.returncode == 0, run.describe()
        assert any(line.startswith("obsmask: totals: ") for line in run.obsmask_lines()), \
            run.describe()
        assert not run.proxy_left_running
