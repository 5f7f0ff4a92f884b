"""The model table page's table is printed from the model table shipped
with the package (``conversation/billing/model_prices.toml``), and must not
drift from it."""

from __future__ import annotations

import subprocess
import sys

from support.processes import REPO

PAGE = REPO / "docs" / "models.md"
DATA = REPO / "addons" / "obsmask_core" / "conversation" / "billing" / "model_prices.toml"


def printed_table() -> str:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "models_table.py")],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    ).stdout.strip()


def test_the_model_table_page_lists_every_row_of_the_shipped_table():
    """docs/models.md holds the table scripts/models_table.py prints from
    the data, every row with its name, patterns, prices, minimum, rule,
    source and date, and the two rows of unknown models."""
    block = printed_table()
    page = PAGE.read_text(encoding="utf-8")
    assert block in page, f"docs/models.md is behind (scripts/models_table.py --write):\n{block}"
    data = DATA.read_text(encoding="utf-8")
    names = [line.split('"')[1] for line in data.splitlines() if line.startswith("name = ")]
    assert len(names) >= 10
    for name in [*names, "anthropic-unknown", "openai-unknown"]:
        assert f"| `{name}` |" in block, name
    for value in ("2026-12-01", "`claude-fable-5*`", "0.025x", "`openai_prefix_steps`"):
        assert value in block

