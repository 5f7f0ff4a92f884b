"""Claude Code, launched: ``ANTHROPIC_BASE_URL`` on the proxy, tool search
on where obsmask would have turned it off, the recall tool through
``--mcp-config``.

Claude Code's settings files can set its environment (an ``env`` table),
and they win over the process's: a base URL there is the upstream (a
gateway of the user's), and the proxy's address then goes in
``--settings``, which wins over them, for this run only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from obsmask_core.launch.agents import (
    ANTHROPIC_UPSTREAM,
    RECALL_SERVER_NAME,
    Agent,
    home_of,
    insert_before_end,
    read_json_object,
)

BASE_URL_VARIABLE = "ANTHROPIC_BASE_URL"
# Claude Code turns tool search off when its base URL is not Anthropic's own
# host, and then sends every MCP tool's schema on every request (about 30k
# tokens a request with 100 tools). When the user's Claude Code talks to
# Anthropic itself, the proxy would be the reason: it forwards what tool
# search sends byte for byte, so the variable turns it back on. A gateway
# of the user's (a base URL of their own) keeps what the user had.
TOOL_SEARCH_VARIABLE = "ENABLE_TOOL_SEARCH"
SETTINGS_OPTION = "--settings"
# Claude Code 2.1.330's subcommands (``claude --help``): they take none of
# the options added for a session.
SUBCOMMANDS = frozenset({
    "agents", "attach", "auth", "auto-mode", "doctor", "gateway", "import", "install",
    "logs", "mcp", "plugin", "plugins", "purge", "respawn", "rm", "setup-token", "stop",
    "kill", "ultrareview", "update", "upgrade"})


def settings_environment(environ: Mapping[str, str], cwd: Path) -> dict[str, str]:
    """The ``env`` of Claude Code's settings files, the ones that win last:
    the user's, the project's, the project's local one."""
    user = Path(environ["CLAUDE_CONFIG_DIR"]) if environ.get("CLAUDE_CONFIG_DIR") else (
        home_of(environ) / ".claude")
    merged: dict[str, str] = {}
    for path in (user / "settings.json", cwd / ".claude" / "settings.json",
                 cwd / ".claude" / "settings.local.json"):
        env = read_json_object(path).get("env")
        if isinstance(env, dict):
            merged.update({str(key): str(value) for key, value in env.items()})
    return merged


@dataclass(frozen=True)
class ClaudeCode(Agent):
    """Claude Code."""

    def _configured(self, environ: Mapping[str, str]) -> dict[str, str]:
        """Its environment as Claude Code sees it: settings files win."""
        return {**environ, **settings_environment(environ, Path.cwd())}

    def upstream_url(self, environ: Mapping[str, str]) -> str:
        return super().upstream_url(self._configured(environ))

    def environment(self, environ: Mapping[str, str], base_url: str) -> dict[str, str]:
        env = super().environment(environ, base_url)
        configured = self._configured(environ)
        if TOOL_SEARCH_VARIABLE not in configured and not configured.get(
                BASE_URL_VARIABLE, "").strip():
            env[TOOL_SEARCH_VARIABLE] = "true"
        return env

    def arguments(self, given: Sequence[str], base_url: str, recall_url: str | None,
                  environ: Mapping[str, str]) -> list[str]:
        if given and given[0] in SUBCOMMANDS:
            return list(given)
        added: list[str] = []
        from_settings = settings_environment(environ, Path.cwd()).get(BASE_URL_VARIABLE)
        if from_settings and SETTINGS_OPTION not in given:
            added += [SETTINGS_OPTION, json.dumps({"env": {BASE_URL_VARIABLE: base_url}})]
        if recall_url is not None:
            servers = {"mcpServers": {RECALL_SERVER_NAME: {"type": "http", "url": recall_url}}}
            added += ["--mcp-config", json.dumps(servers)]
        # --mcp-config takes several values: after the user's own options
        # (and before a "--" that ends them) it cannot swallow a prompt.
        return insert_before_end(given, added)


CLAUDE = ClaudeCode(
    name="claude", program="claude",
    install="npm install -g @anthropic-ai/claude-code (https://docs.claude.com/en/docs/claude-code)",
    base_url_variable=BASE_URL_VARIABLE, default_upstream=ANTHROPIC_UPSTREAM)
