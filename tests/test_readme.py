"""The configuration page's settings tables are derived from the settings
classes, and the README links to that page instead of holding them."""

from __future__ import annotations

import subprocess
import sys

from support.processes import REPO

PAGE = REPO / "docs" / "configuration.md"
README_LINES = 250


def printed_tables() -> list[str]:
    printed = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "settings_table.py")],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    return printed.strip().split("\n\n")


def test_the_configuration_page_lists_every_setting_as_declared():
    """Each setting is declared once, in its feature's settings class: the
    tables of docs/configuration.md are printed from those declarations
    (option, key, default, shipped value, help) and must not drift from
    them."""
    blocks = printed_tables()
    page = PAGE.read_text(encoding="utf-8")
    assert len(blocks) == 4  # conversation, MCP, recall, totals
    for block in blocks:
        assert block in page, (
            f"docs/configuration.md is behind (scripts/settings_table.py --write):\n{block}")
    printed = "\n".join(blocks)
    for option in ("obsmask_window_turns", "obsmask_chat_route", "mcpmask_max_chars",
                   "mcpmask_gateway_timeout", "obsmask_recall_enabled"):
        assert f"`{option}`" in printed


def test_the_readme_holds_no_settings_table_and_links_to_the_configuration_page():
    """The README is short: the tables live on the configuration page only."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "<!-- settings:" not in readme
    assert "docs/configuration.md" in readme


def test_the_readme_is_at_most_250_lines_and_keeps_the_two_commands():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_LINES
    assert "python3 scripts/proxy.py" in readme
    assert "python3 scripts/test.py" in readme
    assert "<!-- headline:bill -->" in readme and "<!-- /headline:bill -->" in readme

