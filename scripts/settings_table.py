#!/usr/bin/env python3
"""Print the configuration page's settings tables, derived from the settings classes.

    python3 scripts/settings_table.py            # every table, with its markers
    python3 scripts/settings_table.py --write    # replace them in docs/configuration.md

Each setting is declared once, as a field of its feature's settings class
(``obsmask_core.shared.settings``); the option, the mitm.toml key, the
default, the shipped value (mitm.toml) and the meaning (the help text) are
read from there. ``tests/test_readme.py`` fails when docs/configuration.md
differs.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from obsmask_core.conversation.settings.policy import POLICY_SECTION, MaskPolicy  # noqa: E402
from obsmask_core.conversation.settings.routes import Routes  # noqa: E402
from obsmask_core.gateway.upstreams import GATEWAY_SECTION, GatewaySettings  # noqa: E402
from obsmask_core.mcp.limits import MASKING_SECTION, TruncationLimits  # noqa: E402
from obsmask_core.recall.settings import RECALL_SECTION, RecallSettings  # noqa: E402
from obsmask_core.shared.config_file import ConfigFile, load_config  # noqa: E402
from obsmask_core.shared.master_switch import SWITCH_SECTION, MasterSwitch  # noqa: E402
from obsmask_core.shared.settings import PAIR_SEPARATOR, Setting, declared  # noqa: E402
from obsmask_core.totals.settings import TOTALS_SECTION, TotalsSettings  # noqa: E402

# table name -> (settings class, option prefix, its mitm.toml table or None)
TABLES: dict[str, list[tuple[type, str, tuple[str, ...] | None]]] = {
    "conversation": [(MasterSwitch, "obsmask_", SWITCH_SECTION),
                     (MaskPolicy, "obsmask_", POLICY_SECTION), (Routes, "obsmask_", None)],
    "mcp": [(TruncationLimits, "mcpmask_", MASKING_SECTION),
            (GatewaySettings, "mcpmask_", GATEWAY_SECTION)],
    "recall": [(RecallSettings, "obsmask_recall_", RECALL_SECTION)],
    "totals": [(TotalsSettings, "obsmask_totals_", TOTALS_SECTION)],
}
PAGE = REPO / "docs" / "configuration.md"


def shown(item: Setting, value: object) -> str:
    """A value as the option takes it, in code quotes."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif item.kind == "pairs" and isinstance(value, tuple):
        text = " ".join(PAIR_SEPARATOR.join(pair) for pair in value) or "(none)"
    elif item.kind == "strings" and isinstance(value, tuple):
        text = " ".join(value) or "(none)"
    else:
        text = str(value) or "(empty)"
    text = text.replace("\n", "\\n").replace("|", "\\|")
    return f"`{text}`"


def table(name: str, shipped: ConfigFile) -> str:
    rows = ["| option (`--set`) | `mitm.toml` key | default | shipped in `mitm.toml` | meaning |",
            "| --- | --- | --- | --- | --- |"]
    for cls, prefix, section in TABLES[name]:
        in_file = shipped.table(section) if section else {}
        for item in declared(cls):
            key = (f"`[{'.'.join(section)}] {item.key}`" if section and item.info.in_file
                   else "(option only)")
            value = in_file.get(item.key)
            ship = ("" if value is None or _typed(item, value) == item.default
                    else shown(item, _typed(item, value)))
            meaning = item.info.help.replace("|", "\\|")
            rows.append(f"| `{item.option_name(prefix)}` | {key} | {shown(item, item.default)} "
                        f"| {ship} | {meaning} |")
    return "\n".join(rows)


def _typed(item: Setting, value: object) -> object:
    if isinstance(value, list):
        return tuple(tuple(v) if isinstance(v, list) else v for v in value)
    return value


def block(name: str, body: str) -> str:
    return (f"<!-- settings:{name} (scripts/settings_table.py) -->\n{body}\n"
            f"<!-- /settings:{name} -->")


def blocks() -> dict[str, str]:
    shipped = load_config(str(REPO / "mitm.toml"))
    return {name: block(name, table(name, shipped)) for name in TABLES}


def _as_it_is(text: str) -> Callable[[re.Match[str]], str]:
    """A re.sub replacement that puts ``text`` in as it is (no backslash escapes)."""
    return lambda _: text


def main() -> None:
    generated = blocks()
    if "--write" not in sys.argv[1:]:
        print("\n\n".join(generated.values()))
        return
    text = PAGE.read_text(encoding="utf-8")
    for name, new in generated.items():
        pattern = re.compile(rf"<!-- settings:{name} .*?<!-- /settings:{name} -->", re.S)
        if not pattern.search(text):
            sys.exit(f"docs/configuration.md has no block for the {name} settings")
        text = pattern.sub(_as_it_is(new), text)
    PAGE.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
