"""The agents obsmask launches: the program, how it is pointed at the
proxy, how the recall tool is registered for one run, and how to install
it when it is missing (``claude_code.py``, ``codex.py``; ``any_program``
for ``obsmask run``).

Nothing here writes an agent's saved configuration: the base URL goes in
the agent's environment (or its command-line override) and the recall
server in a command-line option, both for this run only.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from obsmask_core.launch.upstream import AgentUpstream

ANTHROPIC_UPSTREAM = "https://api.anthropic.com"
OPENAI_UPSTREAM = "https://api.openai.com/v1"
# The name the recall server is registered under for the run.
RECALL_SERVER_NAME = "obsmask-recall"
ARGUMENTS_END = "--"
# The proxy is on the loopback: a proxy of the user's (HTTP_PROXY...) must
# not be asked for it.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
_NO_PROXY = ("NO_PROXY", "no_proxy")


@dataclass(frozen=True)
class Agent:
    """One agent program obsmask can launch: by default, one that reads its
    base URL from ``base_url_variable``."""

    name: str
    program: str
    install: str
    base_url_variable: str
    default_upstream: str

    def upstream_url(self, environ: Mapping[str, str]) -> str:
        """Where the agent would send its traffic without obsmask: its own
        base-URL variable when set (a gateway the user already has), else
        the provider's default."""
        return environ.get(self.base_url_variable, "").strip() or self.default_upstream

    def environment(self, environ: Mapping[str, str], base_url: str) -> dict[str, str]:
        """The agent's environment: the user's, with its base URL on the
        proxy, which no proxy of the user's is asked for."""
        return {**environ, **loopback_not_proxied(environ), self.base_url_variable: base_url}

    def arguments(self, given: Sequence[str], base_url: str, recall_url: str | None,
                  environ: Mapping[str, str]) -> list[str]:
        """The agent's arguments: the user's, and whatever this agent needs
        to reach the proxy or the recall server."""
        return list(given)

    def proxy_options(self, upstream: AgentUpstream) -> list[str]:
        """The proxy's ``--set`` options this agent needs (``NAME=VALUE``)."""
        return []


def loopback_not_proxied(environ: Mapping[str, str]) -> dict[str, str]:
    """``NO_PROXY`` and ``no_proxy`` with the loopback added."""
    out = {}
    for name in _NO_PROXY:
        listed = [host for host in environ.get(name, "").split(",") if host.strip()]
        out[name] = ",".join([*listed, *(h for h in LOOPBACK_HOSTS if h not in listed)])
    return out


def insert_before_end(given: Sequence[str], added: Sequence[str]) -> list[str]:
    """``added`` after the user's arguments, or before their ``--``."""
    arguments = list(given)
    at = arguments.index(ARGUMENTS_END) if ARGUMENTS_END in arguments else len(arguments)
    return [*arguments[:at], *added, *arguments[at:]]


def read_toml(path: Path) -> dict[str, object]:
    """A TOML file's tables, or nothing when it is missing or not TOML (the
    agent then says what is wrong with its own file)."""
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def read_json_object(path: Path) -> dict[str, object]:
    """A JSON file's object, or nothing when it is missing or not one."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def home_of(environ: Mapping[str, str]) -> Path:
    return Path(environ["HOME"]) if environ.get("HOME") else Path.home()


# The upstream of ``obsmask run`` when the variable it sets names none.
DEFAULT_UPSTREAMS: Mapping[str, str] = MappingProxyType({
    "ANTHROPIC_BASE_URL": ANTHROPIC_UPSTREAM, "OPENAI_BASE_URL": OPENAI_UPSTREAM})


def any_program(variable: str) -> Agent:
    """``obsmask run``: any program that reads its base URL from
    ``variable``."""
    return Agent(name="run", program="", install="", base_url_variable=variable,
                 default_upstream=DEFAULT_UPSTREAMS.get(variable, ""))
