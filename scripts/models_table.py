#!/usr/bin/env python3
"""Print the model table page's table, derived from the shipped model table.

    python3 scripts/models_table.py            # the table, with its markers
    python3 scripts/models_table.py --write    # replace it in docs/models.md

The rows are read from ``conversation/billing/model_prices.toml`` (the data
``price_model = "auto"`` prices each request by) with the package's own
reader, so the page shows what the proxy uses. ``tests/test_models_page.py``
fails when docs/models.md differs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from obsmask_core.conversation.billing.model_table import (  # noqa: E402
    PROVIDERS,
    ModelRow,
    cautious_row,
    shipped_rows,
)
from obsmask_core.conversation.billing.price_models import PRICE_UNIT  # noqa: E402

PAGE = REPO / "docs" / "models.md"
NAME = "models"


def multiple(thousandths: int) -> str:
    """A price in thousandths of the base input price, as a multiple."""
    return f"{thousandths / PRICE_UNIT:g}x"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def line(row: ModelRow) -> str:
    patterns = " ".join(f"`{pattern}`" for pattern in row.patterns) or "(none matched)"
    return (f"| `{row.name}` | {patterns} | {row.provider} | {multiple(row.read)} "
            f"| {multiple(row.write)} | {multiple(row.write_1h)} | {row.minimum:,} "
            f"| `{row.cache}` | {cell(row.source)} | {row.checked} |")


def table() -> str:
    rows = shipped_rows()
    lines = ["| row | models | provider | read | write | 1h write | minimum | cache rule "
             "| source | checked |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |"]
    lines += [line(row) for row in rows]
    lines += [line(cautious_row(provider, rows)) for provider in PROVIDERS]
    return "\n".join(lines)


def block() -> str:
    return (f"<!-- {NAME} (scripts/models_table.py) -->\n{table()}\n"
            f"<!-- /{NAME} -->")


def main() -> None:
    generated = block()
    if "--write" not in sys.argv[1:]:
        print(generated)
        return
    text = PAGE.read_text(encoding="utf-8")
    pattern = re.compile(rf"<!-- {NAME} .*?<!-- /{NAME} -->", re.S)
    if not pattern.search(text):
        sys.exit("docs/models.md has no block for the model table")
    PAGE.write_text(pattern.sub(lambda _: generated, text), encoding="utf-8")


if __name__ == "__main__":
    main()
