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
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from obsmask_core.launch.agents import ARGUMENTS_END, Agent, any_program
from obsmask_core.launch.claude_code import CLAUDE
from obsmask_core.launch.codex import CODEX
from obsmask_core.launch.foreground import (
    NOT_FOUND,
    SIGNALLED,
    Interrupted,
    run_in_foreground,
    say,
    signals_end_the_run,
    signals_held,
)
from obsmask_core.launch.proxy_process import (
    LOOPBACK,
    ProxyError,
    ProxyProcess,
    ProxySpec,
    conversation_requests,
)
from obsmask_core.launch.upstream import AgentUpstream, UpstreamError
from obsmask_core.recall.settings import RECALL_PATH

FAILED = 1
AGENTS: Mapping[str, Agent] = MappingProxyType({agent.name: agent for agent in (CLAUDE, CODEX)})
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
    LaunchOption("--upstream", "URL", "where the traffic goes (default: where the agent's "
                 "own configuration sends it, else the provider's API)"),
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
        variable = launch.values.get("--variable", "OPENAI_BASE_URL")
        if not _VARIABLE.fullmatch(variable):
            raise UsageError(f"--variable {variable!r}: not the name of a variable")
        agent = any_program(variable)
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
    upstream = AgentUpstream.parse(launch.values.get("--upstream") or agent.upstream_url(environ))
    keep = "--keep-proxy" in launch.flags
    spec = ProxySpec(upstream.origin, launch.port, launch.values.get("--settings"),
                     _new_log(agent.name), tuple(agent.proxy_options(upstream)))
    proxy: ProxyProcess | None = None
    try:
        with signals_end_the_run():
            proxy = ProxyProcess(spec, outlives_obsmask=keep)
            port = proxy.wait_listening()
    except ProxyError as e:
        say(str(e))
        _stop(proxy)
        return FAILED
    except (KeyboardInterrupt, Interrupted) as e:
        _stop(proxy)
        return SIGNALLED + (e.signum if isinstance(e, Interrupted) else signal.SIGINT)
    base_url = upstream.through(LOOPBACK, port)
    recall_url = f"http://{LOOPBACK}:{port}{RECALL_PATH}" if proxy.recall_on() else None
    say(f"{Path(command[0]).name} through the proxy at {base_url} (proxy pid {proxy.pid}, "
        f"upstream {upstream.url}" + (", recall on" if recall_url else "") + f"; log {spec.log})")
    try:
        status = run_in_foreground(
            [command[0], *agent.arguments(command[1:], base_url, recall_url, environ)],
            agent.environment(environ, base_url))
    except BaseException:
        _stop(proxy)
        raise
    if keep:
        say(f"the proxy keeps running at http://{LOOPBACK}:{port} (pid {proxy.pid}); "
            f"stop it with: kill -INT {proxy.pid}")
        return status
    _end(proxy, agent)
    return status


def _new_log(name: str) -> Path:
    handle, path = tempfile.mkstemp(prefix=f"obsmask-{name}-", suffix=".log")
    os.close(handle)
    return Path(path)


def _stop(proxy: ProxyProcess | None) -> None:
    if proxy is not None:
        with signals_held():
            proxy.stop()


def _end(proxy: ProxyProcess, agent: Agent) -> None:
    """Stop the proxy; print its summary, and what it means when it is not
    the whole run's."""
    died = proxy.exited()
    _stop(proxy)
    summary = proxy.summary()
    for line in summary:
        print(line, file=sys.stderr)
    if died is not None:
        say(f"the proxy stopped during the run (exit {died}): what came after is not counted")
    elif conversation_requests(summary) == 0:
        say(f"the proxy saw no request of {agent.program or 'the program'}: its own settings "
            "may send it elsewhere (a base URL or a model provider of its configuration)")
    say(f"the proxy's log: {proxy.spec.log}")
