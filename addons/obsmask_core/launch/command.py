"""``obsmask claude``, ``obsmask codex`` and ``obsmask run``: start the
proxy, run the agent through it with the terminal untouched, stop the
proxy when the agent exits, print the run's saving, exit with the agent's
status.

obsmask's own options come first; the first argument that is not one of
them (or everything after ``--``) is the agent's, so an agent option with
the same name as one of obsmask's (Claude Code's ``--settings``) is
reached after ``--``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from obsmask_core.launch.agents import AGENTS, ARGUMENTS_END, Agent, any_program
from obsmask_core.launch.proxy_process import LOOPBACK, ProxyError, ProxyProcess, ProxySpec
from obsmask_core.launch.upstream import Upstream, UpstreamError
from obsmask_core.recall.settings import RECALL_PATH

# The shell's statuses for a program that cannot run or is not there.
NOT_EXECUTABLE = 126
NOT_FOUND = 127
FAILED = 1
_SIGNALLED = 128
_FORWARDED = (signal.SIGTERM, signal.SIGHUP)
_LEFT_TO_THE_AGENT = (signal.SIGINT, signal.SIGQUIT)


@dataclass(frozen=True)
class LaunchOption:
    """One of obsmask's own options before the agent's arguments."""

    name: str
    metavar: str | None  # None: a flag
    help: str


OPTIONS = (
    LaunchOption("--port", "PORT", "the proxy's port on 127.0.0.1 (default: a free one)"),
    LaunchOption("--settings", "FILE", "the settings file (default: ./mitm.toml, else "
                 "obsmask's recommended settings)"),
    LaunchOption("--upstream", "URL", "where the traffic goes (default: the agent's own "
                 "base-URL variable when set, else the provider's API)"),
    LaunchOption("--keep-proxy", None, "leave the proxy running when the agent exits"),
)
RUN_OPTIONS = (
    *OPTIONS,
    LaunchOption("--variable", "NAME", "the base-URL variable the program reads (default: "
                 "OPENAI_BASE_URL)"),
)


class UsageError(ValueError):
    """A command line obsmask cannot use."""


@dataclass(frozen=True)
class Launch:
    """A parsed command line: obsmask's options and the agent's arguments."""

    values: Mapping[str, str] = field(default_factory=dict)
    flags: frozenset[str] = frozenset()
    rest: tuple[str, ...] = ()
    help: bool = False

    @property
    def port(self) -> int:
        text = self.values.get("--port", "0")
        if not text.isdigit() or int(text) > 65535:
            raise UsageError(f"--port {text}: a port is a number from 0 to 65535")
        return int(text)


def parse(arguments: Sequence[str], options: Sequence[LaunchOption] = OPTIONS) -> Launch:
    """obsmask's leading options, then the agent's arguments."""
    by_name = {option.name: option for option in options}
    values: dict[str, str] = {}
    flags: set[str] = set()
    rest = list(arguments)
    while rest:
        head = rest[0]
        if head == ARGUMENTS_END:
            rest.pop(0)
            break
        if head in ("-h", "--help"):
            return Launch(help=True)
        name, _, inline = head.partition("=")
        option = by_name.get(name)
        if option is None:
            break
        rest.pop(0)
        if option.metavar is None:
            flags.add(name)
        elif inline or "=" in head:
            values[name] = inline
        elif rest:
            values[name] = rest.pop(0)
        else:
            raise UsageError(f"{name} needs a value ({option.metavar})")
    return Launch(values, frozenset(flags), tuple(rest))


def usage(command: str, options: Sequence[LaunchOption], what: str) -> str:
    lines = [f"usage: obsmask {command} [OPTIONS] [--] {what}", "", "options (before "
             "the agent's arguments; after --, every argument is the agent's):"]
    for option in options:
        spelled = option.name + (f" {option.metavar}" if option.metavar else "")
        lines.append(f"  {spelled:<18} {option.help}")
    return "\n".join(lines)


def say(line: str) -> None:
    """One line of obsmask's on stderr (stdout is the agent's)."""
    print(f"obsmask: {line}", file=sys.stderr, flush=True)


def agent_main(name: str, arguments: Sequence[str]) -> int:
    """``obsmask claude|codex [OPTIONS] [--] ARGS``."""
    agent = AGENTS[name]
    try:
        launch = parse(arguments)
        if launch.help:
            print(usage(name, OPTIONS, f"[{name.upper()} ARGUMENTS...]"))
            return 0
        program = shutil.which(agent.program)
        if program is None:
            say(f"{agent.program} is not installed (not on PATH); install it with: "
                f"{agent.install}")
            return NOT_FOUND
        return run_through_proxy(agent, [program, *launch.rest], launch, os.environ)
    except (UsageError, UpstreamError) as e:
        say(f"{name}: {e}")
        return FAILED


def run_main(arguments: Sequence[str]) -> int:
    """``obsmask run [OPTIONS] -- COMMAND [ARGS]``: any program that reads a
    base-URL variable."""
    try:
        launch = parse(arguments, RUN_OPTIONS)
        if launch.help or not launch.rest:
            print(usage("run", RUN_OPTIONS, "COMMAND [ARGUMENTS...]"),
                  file=sys.stdout if launch.help else sys.stderr)
            return 0 if launch.help else FAILED
        agent = any_program(launch.values.get("--variable", "OPENAI_BASE_URL"))
        if not (launch.values.get("--upstream") or agent.upstream_url(os.environ)):
            raise UsageError(f"{agent.base_url_variable} is not set: say where the traffic "
                             "goes with --upstream URL")
        program = shutil.which(launch.rest[0])
        if program is None:
            say(f"{launch.rest[0]}: no such program on PATH")
            return NOT_FOUND
        return run_through_proxy(agent, [program, *launch.rest[1:]], launch, os.environ)
    except (UsageError, UpstreamError) as e:
        say(f"run: {e}")
        return FAILED


def run_through_proxy(agent: Agent, command: Sequence[str], launch: Launch,
                      environ: Mapping[str, str]) -> int:
    """Start the proxy, run ``command`` through it, stop it, say what was
    saved; the command's exit status."""
    upstream = Upstream.parse(launch.values.get("--upstream") or agent.upstream_url(environ))
    handle, name = tempfile.mkstemp(prefix=f"obsmask-{agent.name}-", suffix=".log")
    os.close(handle)
    log = Path(name)
    proxy = ProxyProcess(ProxySpec(upstream.origin, launch.port,
                                   launch.values.get("--settings"), log,
                                   tuple(agent.proxy_options(upstream))))
    try:
        port = proxy.wait_listening()
    except ProxyError as e:
        proxy.stop()
        say(str(e))
        return FAILED
    base_url = upstream.through(LOOPBACK, port)
    recall_url = f"http://{LOOPBACK}:{port}{RECALL_PATH}" if proxy.recall_on() else None
    say(f"{Path(command[0]).name} through the proxy at {base_url} (proxy pid {proxy.pid}, "
        f"upstream {upstream.url}" + (", recall on" if recall_url else "") + f"; log {log})")
    status = run_in_foreground(
        [command[0], *agent.arguments(command[1:], base_url, recall_url)],
        agent.environment(environ, base_url))
    if "--keep-proxy" in launch.flags:
        say(f"the proxy keeps running at http://{LOOPBACK}:{port} (pid {proxy.pid}); "
            f"stop it with: kill -INT {proxy.pid}")
        return status
    proxy.stop()
    for line in proxy.summary():
        print(line, file=sys.stderr)
    say(f"the proxy's log: {log}")
    return status


def run_in_foreground(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``command`` on this terminal until it exits; its status (128 + N
    when signal N ended it). Ctrl-C and Ctrl-\\ are the agent's (the
    terminal sends them to it too); a SIGTERM or SIGHUP sent to obsmask is
    passed on to it."""
    try:
        process = subprocess.Popen(list(command), env=dict(env))
    except FileNotFoundError:
        say(f"{command[0]}: not found")
        return NOT_FOUND
    except PermissionError:
        say(f"{command[0]}: cannot be run")
        return NOT_EXECUTABLE

    def forward(signum: int, frame: FrameType | None) -> None:
        process.send_signal(signum)

    # Set after the start: an ignored signal would be inherited by the agent.
    handlers: dict[signal.Signals, Callable[[int, FrameType | None], object] | int | None] = {}
    for number in _LEFT_TO_THE_AGENT:
        handlers[number] = signal.signal(number, signal.SIG_IGN)
    for number in _FORWARDED:
        handlers[number] = signal.signal(number, forward)
    try:
        status = process.wait()
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    return _SIGNALLED - status if status < 0 else status
