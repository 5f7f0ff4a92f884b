"""Codex, launched: its provider's base URL and the recall server as
``-c`` overrides, which apply to this run only (Codex ignores
``OPENAI_BASE_URL``), and WebSocket upgrades refused by the proxy.

The upstream is where the user's Codex would go: the ``base_url`` of the
model provider its configuration chooses, else its ``openai_base_url``,
else the ChatGPT backend for a ChatGPT login, else OpenAI's API.

Codex first asks to turn the Responses route into a WebSocket, whose
messages obsmask does not read; the proxy answers 426 and Codex falls back
at once to HTTP POSTs (``refuse_websockets``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from obsmask_core.launch.agents import (
    OPENAI_UPSTREAM,
    RECALL_SERVER_NAME,
    Agent,
    home_of,
    loopback_not_proxied,
    read_json_object,
    read_toml,
)
from obsmask_core.launch.upstream import AgentUpstream

# Where Codex sends a ChatGPT login's requests when no base URL is set.
CHATGPT_UPSTREAM = "https://chatgpt.com/backend-api/codex"
BUILT_IN_PROVIDER = "openai"
# The Responses route the proxy reads as is, under the API's path.
_API_PATH = "/v1"
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def codex_home(environ: Mapping[str, str]) -> Path:
    return Path(environ["CODEX_HOME"]) if environ.get("CODEX_HOME") else (
        home_of(environ) / ".codex")


def chosen_provider(config: Mapping[str, object]) -> tuple[str, str] | None:
    """The model provider of the user's own that the configuration chooses,
    and its base URL (None: the built-in OpenAI provider)."""
    name = config.get("model_provider")
    providers = config.get("model_providers")
    if not isinstance(name, str) or name == BUILT_IN_PROVIDER or not isinstance(providers, dict):
        return None
    provider = providers.get(name)
    base_url = provider.get("base_url") if isinstance(provider, dict) else None
    return (name, base_url) if isinstance(base_url, str) and base_url.strip() else None


def chatgpt_login(path: Path) -> bool:
    """Whether Codex's stored login is a ChatGPT one (its ``auth_mode``, or
    tokens without an API key in files that predate it)."""
    stored = read_json_object(path)
    mode = stored.get("auth_mode")
    if isinstance(mode, str):
        return mode.lower() == "chatgpt"
    return bool(stored.get("tokens")) and not stored.get("OPENAI_API_KEY")


def _toml_key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name)


@dataclass(frozen=True)
class Codex(Agent):
    """Codex."""

    def upstream_url(self, environ: Mapping[str, str]) -> str:
        home = codex_home(environ)
        config = read_toml(home / "config.toml")
        if (provider := chosen_provider(config)) is not None:
            return provider[1].strip()
        configured = config.get("openai_base_url")
        if isinstance(configured, str) and configured.strip():
            return configured.strip()
        if not environ.get("CODEX_API_KEY") and chatgpt_login(home / "auth.json"):
            return CHATGPT_UPSTREAM
        return self.default_upstream

    def environment(self, environ: Mapping[str, str], base_url: str) -> dict[str, str]:
        # Codex reads no base-URL variable: only the loopback exemption.
        return {**environ, **loopback_not_proxied(environ)}

    def arguments(self, given: Sequence[str], base_url: str, recall_url: str | None,
                  environ: Mapping[str, str]) -> list[str]:
        provider = chosen_provider(read_toml(codex_home(environ) / "config.toml"))
        key = (f"model_providers.{_toml_key(provider[0])}.base_url" if provider
               else "openai_base_url")
        overrides = ["-c", f"{key}={json.dumps(base_url)}"]
        if recall_url is not None:
            overrides += ["-c", f"mcp_servers.{RECALL_SERVER_NAME}.url={json.dumps(recall_url)}"]
        return [*overrides, *given]

    def proxy_options(self, upstream: AgentUpstream) -> list[str]:
        options = ["obsmask_refuse_websockets=true"]
        if upstream.path != _API_PATH:
            options.append(f"obsmask_responses_route={re.escape(upstream.path)}/responses$")
        return options


CODEX = Codex(
    name="codex", program="codex",
    install="npm install -g @openai/codex (https://github.com/openai/codex)",
    base_url_variable="OPENAI_BASE_URL", default_upstream=OPENAI_UPSTREAM)
