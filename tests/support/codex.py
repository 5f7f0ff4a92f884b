"""Run the real Codex CLI (``codex exec``, OpenAI Responses API) for the
end-to-end tests, cut off from the network: its only server is the one named
by the base URL.

scripts/test.py installs the pinned ``@openai/codex`` into .venv/agents-node
and sets ``OBSMASK_NPM_AGENTS_BIN`` (the folder of the ``codex`` executable),
or ``OBSMASK_NPM_AGENTS_PROBLEM`` (why it could not); without either (plain
pytest) the tests that need Codex are skipped.

How Codex 0.171 takes its base URL and its credentials (read in its source,
codex-rs/model-provider-info, and in the pull requests named; what a run
shows was checked with the 0.171.0 binary against a recording server):

- The built-in ``openai`` provider takes its base URL from the top-level
  config key ``openai_base_url``, which ``-c openai_base_url="URL"`` sets on
  the command line (or ``openai_base_url = "URL"`` in
  ``$CODEX_HOME/config.toml``). Codex appends ``/responses``: a base URL
  ending in ``/v1`` gives ``POST URL/responses``, the real API's path.
  Without it the default is ``https://api.openai.com/v1`` with an API key
  and ``https://chatgpt.com/backend-api/codex`` with a ChatGPT login; set,
  it replaces either (``ModelProviderInfo::to_api_provider``).
- The ``OPENAI_BASE_URL`` environment variable is ignored: deprecated in
  favour of ``openai_base_url`` (openai/codex#12031), then removed
  (openai/codex#16720). A 0.171 run with it set and no config key went to
  api.openai.com, and said nothing.
- ``model_providers.openai.base_url`` is refused: "Built-in providers cannot
  be overridden", and Codex exits with code 1.
- The base URL of the built-in provider keeps the user's own credentials:
  the login stored in ``$CODEX_HOME/auth.json`` (a ChatGPT login, or an API
  key saved by ``codex login --with-api-key``), or, for ``codex exec``, the
  ``CODEX_API_KEY`` environment variable, sent as ``Authorization: Bearer``.
  ``OPENAI_API_KEY`` alone is not read by the built-in provider.
- A provider of one's own (``-c model_provider=ID`` and
  ``-c 'model_providers.ID={name="...", base_url="URL",
  env_key="OPENAI_API_KEY"}'``) also works, with its ``env_key`` variable as
  the key (or the stored login with ``requires_openai_auth=true``).
- The built-in provider first tries the Responses API's WebSocket transport
  (``GET URL/responses`` with ``Upgrade: websocket``), and uses HTTP streaming
  (``POST``, server-sent events) only when that fails: at once on an HTTP
  426, after five retries with backoff (about 7 s) on a 404. A provider of
  one's own speaks HTTP only (``supports_websockets`` defaults to false).
  Through a reverse proxy to the real API, the built-in provider's upgrade
  would be forwarded and accepted, and its requests would then travel as
  WebSocket messages, not as the ``POST`` bodies obsmask rewrites.

The command line (``codex_command``) runs one task with no question asked
and nothing but the model server to talk to: ``codex exec --json`` (events
as JSON lines), ``--skip-git-repo-check`` (the work folder is no git
repository), ``--ephemeral`` (no session files), ``--ignore-user-config``
and ``--ignore-rules`` (nothing of a config file), ``-s danger-full-access``
with ``approval_policy="never"`` (no sandbox: bubblewrap cannot run as root in
a container; and no approval to wait for), ``--disable plugins`` (else Codex
syncs its plugin marketplace: ``git`` to github.com, api.github.com,
chatgpt.com), ``analytics.enabled=false`` (else events go to ab.chatgpt.com),
``check_for_update_on_startup=false``, and a model that Codex's catalog does
not know (``MODEL``): Codex then offers the classic function tools, its
shell being ``exec_command`` (``{"cmd": ...}``), where the catalog's default
model gets "code mode" (one ``exec`` tool running JavaScript, declared in an
``additional_tools`` input item, with no ``tools`` field).

Each run gets a folder of its own, laid out as ``home/`` (``HOME``, with
``home/.codex`` as ``CODEX_HOME``: the developer's ``~/.codex`` is never
read), ``tmp/`` (``TMPDIR``) and ``work/`` (the working directory). The
environment is built from nothing but ``PATH``: a fake ``CODEX_API_KEY``,
no setting of the developer's. ``HTTP_PROXY`` and ``HTTPS_PROXY`` (which
Codex and the ``git`` it runs honour) name a trap on 127.0.0.1 that records
and refuses every connection, and ``NO_PROXY`` exempts 127.0.0.1 only: a run
reports in ``outside`` any request that was meant for another host.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from support.agents import npm_agent, run_program
from support.claude_code import network_trap

# A model Codex's catalog does not know: the classic tools (see the docstring).
MODEL = "obsmask-scripted-model"
API_KEY = "sk-obsmask-e2e-not-a-real-key"
RUN_TIMEOUT = 60.0

Json = dict[str, object]

# What makes a run ask nothing and reach no other host (see the docstring).
HERMETIC_ARGUMENTS = (
    "--json",
    "--skip-git-repo-check",
    "--ephemeral",
    "--ignore-user-config",
    "--ignore-rules",
    "--sandbox",
    "danger-full-access",
    "-c",
    'approval_policy="never"',
    "--disable",
    "plugins",
    "-c",
    "analytics.enabled=false",
    "-c",
    "check_for_update_on_startup=false",
)


def codex_executable() -> Path:
    """The ``codex`` program; the test is skipped, saying why, without it."""
    return npm_agent("codex", "Codex")


def base_url_arguments(base_url: str) -> list[str]:
    """The arguments that point the built-in ``openai`` provider at
    ``base_url`` (Codex posts to ``base_url + "/responses"``)."""
    return ["-c", f"openai_base_url={json.dumps(base_url)}"]


def codex_environment(root: Path, trap: str) -> dict[str, str]:
    """The environment of a run in ``root`` (see ``prepare_folder``), its
    proxies pointing at ``trap``."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "CODEX_HOME": str(root / "home" / ".codex"),
        "TMPDIR": str(root / "tmp"),
        "LANG": "C.UTF-8",
        "SHELL": shutil.which("bash") or "/bin/bash",
        "CODEX_API_KEY": API_KEY,
        "HTTP_PROXY": trap,
        "HTTPS_PROXY": trap,
        "NO_PROXY": "127.0.0.1",
    }


def codex_command(base_url: str, prompt: str, arguments: Sequence[str] = ()) -> list[str]:
    """``codex exec`` of ``prompt`` against ``base_url``, hermetic; ``arguments`` follow."""
    return [
        str(codex_executable()),
        "exec",
        *HERMETIC_ARGUMENTS,
        "--model",
        MODEL,
        *base_url_arguments(base_url),
        *arguments,
        prompt,
    ]


def prepare_folder(root: Path) -> Path:
    """A fresh run folder at ``root`` (removed first if there); its work/."""
    if root.exists():
        shutil.rmtree(root)
    (root / "home" / ".codex").mkdir(parents=True)
    (root / "tmp").mkdir()
    (root / "work").mkdir()
    return root / "work"


@dataclass(frozen=True)
class Command:
    """A shell command Codex ran, as its ``--json`` events report it."""

    command: str  # as Codex ran it: /bin/bash -lc '...'
    output: str  # stdout and stderr, as the command wrote them
    exit_code: int | None


@dataclass(frozen=True)
class CodexRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    # The first bytes of each connection made to the trap (see the module docstring).
    outside: tuple[bytes, ...]

    def events(self) -> list[Json]:
        """The ``--json`` events, one a line."""
        events = []
        for line in self.stdout.splitlines():
            if line.strip():
                event = json.loads(line)
                assert isinstance(event, dict), line
                events.append(event)
        return events

    def items(self, kind: str) -> list[Json]:
        """The completed items of one type (``agent_message``, ``command_execution``...)."""
        out = []
        for event in self.events():
            item = event.get("item")
            if event.get("type") == "item.completed" and isinstance(item, dict):
                if item.get("type") == kind:
                    out.append(item)
        return out

    def final_message(self) -> str:
        """The last thing Codex said: its answer."""
        messages = self.items("agent_message")
        return str(messages[-1]["text"]) if messages else ""

    def commands(self) -> list[Command]:
        return [
            Command(str(item["command"]), str(item["aggregated_output"]),
                    item["exit_code"] if isinstance(item["exit_code"], int) else None)
            for item in self.items("command_execution")
        ]

    def describe(self) -> str:
        return (
            f"codex exited with {self.returncode}:\n{self.stdout[-3000:]}\n{self.stderr[-3000:]}"
        )


def run_codex(
    root: Path,
    base_url: str,
    prompt: str,
    arguments: Sequence[str] = (),
    timeout: float = RUN_TIMEOUT,
) -> CodexRun:
    """``codex exec PROMPT`` in ``root``'s work/ (see ``prepare_folder``),
    talking to ``base_url`` only; ``arguments`` follow the others."""
    command = codex_command(base_url, prompt, arguments)
    with network_trap() as (trap, caught):
        done, seconds = run_program(command, root / "work", codex_environment(root, trap),
                                     timeout)
    return CodexRun(done.returncode, done.stdout, done.stderr, seconds, tuple(caught))
