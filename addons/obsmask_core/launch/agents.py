"""The agents obsmask launches: the program, how it is pointed at the
proxy, how the recall tool is registered for one run, and how to install
it when it is missing.

Nothing here writes an agent's saved configuration: the base URL goes in
the agent's environment (or its command-line override) and the recall
server in a command-line option, both for this run only.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from obsmask_core.launch.upstream import Upstream

ANTHROPIC_UPSTREAM = "https://api.anthropic.com"
OPENAI_UPSTREAM = "https://api.openai.com/v1"
# Where Codex sends a ChatGPT login's requests when no base URL is set.
CHATGPT_UPSTREAM = "https://chatgpt.com/backend-api/codex"
# The Responses route the proxy reads, when the upstream's path is not /v1.
_API_PATH = "/v1"
# Claude Code turns tool search off when its base URL is not Anthropic's own
# host, and then sends every MCP tool's schema on every request (about 30k
# tokens a request with 100 tools): obsmask forwards the blocks tool search
# uses byte for byte, so it is turned back on unless the user chose.
TOOL_SEARCH_VARIABLE = "ENABLE_TOOL_SEARCH"
# The name the recall server is registered under for the run.
RECALL_SERVER_NAME = "obsmask-recall"
ARGUMENTS_END = "--"


@dataclass(frozen=True)
class Agent:
    """One agent program obsmask can launch."""

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
        proxy."""
        return {**environ, self.base_url_variable: base_url}

    def arguments(self, given: Sequence[str], base_url: str, recall_url: str | None) -> list[str]:
        """The agent's arguments: the user's, and whatever this agent needs
        to reach the proxy or the recall server."""
        return list(given)

    def proxy_options(self, upstream: Upstream) -> list[str]:
        """The proxy's ``--set`` options this agent needs (``NAME=VALUE``)."""
        return []


@dataclass(frozen=True)
class ClaudeCode(Agent):
    """Claude Code: ``ANTHROPIC_BASE_URL``, tool search on, recall through
    ``--mcp-config`` (added to the user's servers, not saved)."""

    def environment(self, environ: Mapping[str, str], base_url: str) -> dict[str, str]:
        return {TOOL_SEARCH_VARIABLE: "true", **super().environment(environ, base_url)}

    def arguments(self, given: Sequence[str], base_url: str, recall_url: str | None) -> list[str]:
        if recall_url is None:
            return list(given)
        servers = {"mcpServers": {RECALL_SERVER_NAME: {"type": "http", "url": recall_url}}}
        # --mcp-config takes several values: after the user's own options
        # (and before a "--" that ends them) it cannot swallow a prompt.
        return insert_before_end(given, ["--mcp-config", json.dumps(servers)])


@dataclass(frozen=True)
class Codex(Agent):
    """Codex: the built-in OpenAI provider's base URL and the recall server
    as ``-c`` overrides, which apply to this run only (Codex ignores
    ``OPENAI_BASE_URL``). Its upstream is the ``openai_base_url`` of the
    user's Codex configuration, else the ChatGPT backend for a ChatGPT
    login, else the API.

    Codex first asks to turn the Responses route into a WebSocket, whose
    messages obsmask does not read; the proxy answers 426 and Codex falls
    back at once to HTTP POSTs (``refuse_websockets``)."""

    def upstream_url(self, environ: Mapping[str, str]) -> str:
        home = Path(environ.get("CODEX_HOME") or Path(environ.get("HOME", "~"), ".codex"))
        configured = _read_toml(home / "config.toml").get("openai_base_url")
        if isinstance(configured, str) and configured.strip():
            return configured.strip()
        if not environ.get("CODEX_API_KEY") and _chatgpt_login(home / "auth.json"):
            return CHATGPT_UPSTREAM
        return self.default_upstream

    def environment(self, environ: Mapping[str, str], base_url: str) -> dict[str, str]:
        return dict(environ)

    def arguments(self, given: Sequence[str], base_url: str, recall_url: str | None) -> list[str]:
        overrides = ["-c", f"openai_base_url={json.dumps(base_url)}"]
        if recall_url is not None:
            overrides += ["-c", f"mcp_servers.{RECALL_SERVER_NAME}.url={json.dumps(recall_url)}"]
        return [*overrides, *given]

    def proxy_options(self, upstream: Upstream) -> list[str]:
        options = ["obsmask_refuse_websockets=true"]
        if upstream.path != _API_PATH:
            options.append(f"obsmask_responses_route={re.escape(upstream.path)}/responses$")
        return options


def _read_toml(path: Path) -> dict[str, object]:
    """A TOML file's tables, or nothing when it is missing or not TOML (the
    agent then says what is wrong with its own file)."""
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _chatgpt_login(path: Path) -> bool:
    """Whether Codex's stored login is a ChatGPT one (tokens, no API key)."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(stored, dict) and bool(stored.get("tokens")) and not stored.get(
        "OPENAI_API_KEY")


def insert_before_end(given: Sequence[str], added: Sequence[str]) -> list[str]:
    """``added`` after the user's arguments, or before their ``--``."""
    arguments = list(given)
    at = arguments.index(ARGUMENTS_END) if ARGUMENTS_END in arguments else len(arguments)
    return [*arguments[:at], *added, *arguments[at:]]


CLAUDE = ClaudeCode(
    name="claude", program="claude",
    install="npm install -g @anthropic-ai/claude-code (https://docs.claude.com/en/docs/claude-code)",
    base_url_variable="ANTHROPIC_BASE_URL", default_upstream=ANTHROPIC_UPSTREAM)
CODEX = Codex(
    name="codex", program="codex",
    install="npm install -g @openai/codex (https://github.com/openai/codex)",
    base_url_variable="OPENAI_BASE_URL", default_upstream=OPENAI_UPSTREAM)
AGENTS: Mapping[str, Agent] = MappingProxyType({agent.name: agent for agent in (CLAUDE, CODEX)})
# The upstream of ``obsmask run`` when the variable it sets names none.
DEFAULT_UPSTREAMS: Mapping[str, str] = MappingProxyType({
    "ANTHROPIC_BASE_URL": ANTHROPIC_UPSTREAM, "OPENAI_BASE_URL": OPENAI_UPSTREAM})


def any_program(variable: str) -> Agent:
    """``obsmask run``: any program that reads its base URL from
    ``variable``."""
    return Agent(name="run", program="", install="", base_url_variable=variable,
                 default_upstream=DEFAULT_UPSTREAMS.get(variable, ""))
