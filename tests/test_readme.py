"""The README's settings tables are derived from the settings classes."""

from __future__ import annotations

import subprocess
import sys

from support.processes import REPO


def test_the_readme_lists_every_setting_as_declared():
    """Each setting is declared once, in its feature's settings class: the
    README's tables are printed from those declarations (option, key,
    default, shipped value, help) and must not drift from them."""
    printed = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "settings_table.py")],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = printed.strip().split("\n\n")
    assert len(blocks) == 4  # conversation, MCP, recall, totals
    for block in blocks:
        assert block in readme, f"README.md is behind (scripts/settings_table.py --write):\n{block}"
    for option in ("obsmask_window_turns", "obsmask_chat_route", "mcpmask_max_chars",
                   "mcpmask_gateway_timeout", "obsmask_recall_enabled"):
        assert f"`{option}`" in printed
