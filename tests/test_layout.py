"""The rules of the package's layout, checked on the tree itself.

``addons/obsmask_core`` has ten folders. Which may import which:

- ``shared/``: no folder of ours (it is what the others build on);
- ``conversation/`` and ``mcp/``: ``shared/`` only (the two features never
  lean on each other);
- ``recall/``: ``shared/`` only (both features' results come back through
  it, so it may lean on neither);
- ``gateway/``: ``shared/`` and ``mcp/`` (it reads JSON-RPC with the MCP
  scanner);
- ``totals/``: ``shared/`` only (it adds up the facts the features leave in
  flow metadata, so it leans on neither);
- ``offline/`` (``obsmask report`` and ``obsmask measure``: recorded traffic
  replayed and billed away from the proxy): ``shared/``, ``conversation/``,
  ``totals/`` and ``mitm/``'s adapters (its reader of flow files, of
  ``--set`` options and its list of the settings file's tables: the one
  place mitmproxy is used for it), imported inside the functions that
  read, so that loading offline/ loads no mitmproxy (the third test checks
  it, as for every folder but mitm/);
- ``launch/`` (``obsmask claude``, ``obsmask codex``, ``obsmask run``: the
  proxy started as a child process for one run of an agent): ``shared/``
  and ``recall/`` (the recall tool's route, registered with the agent);
- ``mitm/``: any of them but offline/, launch/ and cli/ (no arrow runs back
  up from the adapters); and it is the only folder that imports mitmproxy;
- ``cli/`` (the ``obsmask`` command): ``shared/``, ``mitm/`` (mitmproxy's
  tools), ``offline/`` and ``launch/``; nothing imports it.

Every module lives in one of the folders: nothing but ``__init__.py`` at the
top of the package.

``conversation/`` is ten rooms that show the pipeline, each leaning only on
the rooms before it (``CONVERSATION_MAY_IMPORT``): ``body/`` (reading and
splicing the bytes) and ``billing/`` and ``usage/`` lean on no other room;
``turns/`` (the one turn model) on ``body/``; ``settings/`` on ``turns/`` and
``billing/``; ``frontier/`` (the replay over the history) on those three;
``planning/`` on those and ``frontier/``; ``reuse/`` (the fast path) on
``body/``, ``turns/``, ``billing/`` (a kept request's breakpoints),
``settings/``, ``frontier/`` and ``planning/``;
``masking/`` (the rewrite and the masker) on any room but ``usage/`` and
``view/``; ``view/`` on any room but ``usage/``. Nothing but ``__init__.py``
sits at the top of ``conversation/``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from support.processes import REPO

PACKAGE = "obsmask_core"
ROOMS = ("shared", "conversation", "mcp", "recall", "gateway", "totals", "offline", "launch",
         "mitm", "cli")
MAY_IMPORT = {
    "shared": set(),
    "conversation": {"shared"},
    "mcp": {"shared"},
    "recall": {"shared"},
    "gateway": {"shared", "mcp"},
    "totals": {"shared"},
    "offline": {"shared", "conversation", "totals", "mitm"},
    "launch": {"shared", "recall"},
    "mitm": {"shared", "conversation", "mcp", "recall", "gateway", "totals"},
    "cli": {"shared", "mitm", "offline", "launch"},
}
CONVERSATION_MAY_IMPORT = {
    "body": set(),
    "billing": set(),
    "usage": set(),
    "turns": {"body"},
    "settings": {"turns", "billing"},
    "frontier": {"turns", "billing", "settings"},
    "planning": {"turns", "billing", "settings", "frontier"},
    "reuse": {"body", "turns", "billing", "settings", "frontier", "planning"},
    "masking": {"body", "turns", "billing", "settings", "frontier", "planning", "reuse"},
    "view": {"body", "turns", "billing", "settings", "frontier", "planning", "reuse",
             "masking"},
}
ONLY_ROOM_WITH_MITMPROXY = "mitm"
# What offline/ may use of mitm/: its adapters (flow files, the proxy's
# options, the tables of the settings file), not its addons.
OFFLINE_ADAPTERS = frozenset({"obsmask_core.mitm.recorded_flows",
                              "obsmask_core.mitm.option_values",
                              "obsmask_core.mitm.file_tables"})


def imported_modules(source: str) -> set[str]:
    """Every absolute module name that ``source`` imports, at any depth."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if node.module == PACKAGE:  # ``from obsmask_core import mcp``
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def layout_violations(package_dir: Path) -> list[str]:
    """One line per module that breaks a rule of this file's docstring."""
    problems = []
    for path in sorted(package_dir.rglob("*.py")):
        relative = path.relative_to(package_dir)
        if len(relative.parts) == 1:
            if relative.name != "__init__.py":
                problems.append(f"{relative}: a module outside the folders {', '.join(ROOMS)}")
            continue
        room = relative.parts[0]
        if room not in MAY_IMPORT:
            problems.append(f"{relative}: {room}/ is not one of the folders {', '.join(ROOMS)}")
            continue
        imported = imported_modules(path.read_text(encoding="utf-8"))
        if room == "conversation":
            problems.extend(_conversation_violations(relative, imported))
        if room == "offline":
            problems.extend(f"{relative}: imports {module}; offline/ uses only mitm/'s adapters"
                            for module in sorted(imported)
                            if module.startswith(f"{PACKAGE}.mitm.")
                            and module not in OFFLINE_ADAPTERS)
        targets = {".".join(module.split(".")[:2]) for module in imported}
        for target in sorted(targets):
            top, _, other = target.partition(".")
            if top == "mitmproxy" and room != ONLY_ROOM_WITH_MITMPROXY:
                problems.append(f"{relative}: imports mitmproxy; only mitm/ may import it")
            if top == PACKAGE and other in ROOMS and other != room:
                if other not in MAY_IMPORT[room]:
                    problems.append(f"{relative}: imports {target}; {room}/ may not import "
                                    f"{other}/")
    return problems


def _conversation_violations(relative: Path, imported: set[str]) -> list[str]:
    """The rules between conversation/'s rooms, for one of its modules."""
    if len(relative.parts) == 2:
        return [] if relative.name == "__init__.py" else [
            f"{relative}: a module outside conversation/'s rooms "
            f"{', '.join(CONVERSATION_MAY_IMPORT)}"]
    room = relative.parts[1]
    if room not in CONVERSATION_MAY_IMPORT:
        return [f"{relative}: {room}/ is not one of conversation/'s rooms"]
    problems = []
    for module in sorted(imported):
        parts = module.split(".")
        if parts[:2] != [PACKAGE, "conversation"] or len(parts) < 3 or parts[2] == room:
            continue
        if parts[2] not in CONVERSATION_MAY_IMPORT[room]:
            problems.append(f"{relative}: imports {'.'.join(parts[:3])}; conversation/{room}/ "
                            f"may not import conversation/{parts[2]}/")
    return problems


def test_the_package_keeps_its_folder_rules():
    assert layout_violations(REPO / "addons" / PACKAGE) == []


def test_the_rule_check_finds_a_feature_importing_the_other(tmp_path):
    """The check can fail: a conversation module that imports the MCP half,
    a shared module that imports a feature, mitmproxy outside mitm/ (even
    in offline/'s readers, which use mitm/'s), an adapter that imports
    offline/, and a module at the top are each reported."""
    package = tmp_path / PACKAGE
    for room in ROOMS:
        (package / room).mkdir(parents=True)
        (package / room / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "conversation" / "planning").mkdir()
    (package / "conversation" / "planning" / "bad.py").write_text(
        "from obsmask_core.mcp.jsonrpc import scan_jsonrpc\n")
    (package / "shared" / "bad.py").write_text(
        "def later():\n    import obsmask_core.conversation.settings.policy\n")
    (package / "mcp" / "bad.py").write_text("from mitmproxy import http\n")
    (package / "gateway" / "fine.py").write_text("from obsmask_core.mcp import jsonrpc\n")
    (package / "recall" / "bad.py").write_text("from obsmask_core.conversation import recall\n")
    (package / "loose.py").write_text("")
    (package / "offline" / "fine.py").write_text(
        "def read():\n    from obsmask_core.mitm.recorded_flows import FlowFile\n")
    (package / "offline" / "addon.py").write_text(
        "def read():\n    from obsmask_core.mitm.conversation_addon import ConversationMasking\n")
    (package / "offline" / "bad.py").write_text(
        "from mitmproxy import io\nfrom obsmask_core.mcp import cut\n")
    (package / "mitm" / "bad.py").write_text("from obsmask_core.offline import commands\n")
    problems = layout_violations(package)
    assert problems == [
        "conversation/planning/bad.py: imports obsmask_core.mcp; conversation/ may not "
        "import mcp/",
        "loose.py: a module outside the folders shared, conversation, mcp, recall, gateway, "
        "totals, offline, launch, mitm, cli",
        "mcp/bad.py: imports mitmproxy; only mitm/ may import it",
        "mitm/bad.py: imports obsmask_core.offline; mitm/ may not import offline/",
        "offline/addon.py: imports obsmask_core.mitm.conversation_addon; offline/ uses only "
        "mitm/'s adapters",
        "offline/bad.py: imports mitmproxy; only mitm/ may import it",
        "offline/bad.py: imports obsmask_core.mcp; offline/ may not import mcp/",
        "recall/bad.py: imports obsmask_core.conversation; recall/ may not import "
        "conversation/",
        "shared/bad.py: imports obsmask_core.conversation; shared/ may not import conversation/",
    ]


def test_the_rule_check_finds_a_conversation_room_leaning_on_a_later_one(tmp_path):
    """The rooms of conversation/ lean only on earlier ones: the turn model
    may not import the planner, the planner may not import the fast path,
    the frontier may not import the planner, and no module sits at the top
    of conversation/."""
    package = tmp_path / PACKAGE
    for room in CONVERSATION_MAY_IMPORT:
        (package / "conversation" / room).mkdir(parents=True)
    (package / "conversation" / "loose.py").write_text("")
    (package / "conversation" / "turns" / "bad.py").write_text(
        "from obsmask_core.conversation.planning.planner import plan_masking\n")
    (package / "conversation" / "planning" / "bad.py").write_text(
        "def later():\n    from obsmask_core.conversation.reuse import hint\n")
    (package / "conversation" / "frontier" / "bad.py").write_text(
        "from obsmask_core.conversation.planning.plan import MaskPlan\n")
    (package / "conversation" / "masking" / "fine.py").write_text(
        "from obsmask_core.conversation.reuse.hint import Reuse\n"
        "from obsmask_core.conversation.masking.verify import verify\n")
    assert layout_violations(package) == [
        "conversation/frontier/bad.py: imports obsmask_core.conversation.planning; "
        "conversation/frontier/ may not import conversation/planning/",
        "conversation/loose.py: a module outside conversation/'s rooms body, billing, usage, "
        "turns, settings, frontier, planning, reuse, masking, view",
        "conversation/planning/bad.py: imports obsmask_core.conversation.reuse; "
        "conversation/planning/ may not import conversation/reuse/",
        "conversation/turns/bad.py: imports obsmask_core.conversation.planning; "
        "conversation/turns/ may not import conversation/planning/",
    ]


def test_importing_everything_outside_mitm_loads_no_mitmproxy():
    """What the static check cannot see (an import through a helper): loading
    every module outside mitm/ leaves mitmproxy out of sys.modules."""
    package = REPO / "addons" / PACKAGE
    modules = [
        ".".join((PACKAGE, *path.relative_to(package).with_suffix("").parts))
        for path in sorted(package.rglob("*.py"))
        if path.parent.name != ONLY_ROOM_WITH_MITMPROXY and path.name != "__init__.py"
    ]
    assert len(modules) > 10
    imports = "; ".join(f"import {name}" for name in modules)
    check = (
        f"import sys; sys.path.insert(0, 'addons'); {imports}; "
        "leaked = sorted(m for m in sys.modules if m.split('.')[0] == 'mitmproxy'); "
        "print(leaked); sys.exit(1 if leaked else 0)"
    )
    result = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_packages_functions_are_held_to_8_arguments_and_50_statements():
    """ruff's argument and statement counts run on the package (the test
    below runs ruff); the few exceptions are named, file by file, in the
    config."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]
    lint = config["lint"]
    assert {"PLR0913", "PLR0915"} <= set(lint["select"])
    assert lint["pylint"]["max-args"] <= 8 and lint["pylint"]["max-statements"] <= 50
    excepted = [name for name, rules in lint["per-file-ignores"].items()
                if {"PLR0913", "PLR0915"} & set(rules) and name.startswith("addons/")]
    assert len(excepted) <= 5, excepted


def test_ruff_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "addons", "scripts", "tests"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_type_checker_is_clean():
    """mypy, strict and with no explicit Any, over the package (pyproject.toml
    says what it checks)."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
