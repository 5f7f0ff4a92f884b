"""Project rules that a reviewer would otherwise have to remember."""

from __future__ import annotations

import subprocess
import sys

from support.processes import REPO

PURE_MODULES = [
    "policy", "tool_turns", "wire_formats", "error_heuristic", "masking", "json_spans",
    "request_body", "tokens", "toml_config", "truncation", "provider_usage",
    "inflate", "jsonrpc_truncation", "sse_truncation", "gateway",
]


def test_pure_modules_import_nothing_from_mitmproxy():
    """The masking code is shared by the addons, the tests and the scripts,
    and knows nothing of mitmproxy."""
    imports = "; ".join(f"import obsmask_core.{name}" for name in PURE_MODULES)
    check = (
        f"import sys; sys.path.insert(0, 'addons'); {imports}; "
        "leaked = sorted(m for m in sys.modules if m.split('.')[0] == 'mitmproxy'); "
        "print(leaked); sys.exit(1 if leaked else 0)"
    )
    result = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "addons", "scripts", "tests"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
