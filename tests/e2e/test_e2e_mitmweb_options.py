"""End to end: mitmweb's options editor shows the values in force.

A real mitmweb with obsmask, started in a folder whose mitm.toml sets
window_turns = 4 and min_free_percent = 80, one option also given with
--set: its ``GET /options`` (what the options editor shows) gives the
file's values as the options' defaults and values, and the --set value as
the value.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.json_values import as_object
from support.mitmweb import running_mitmweb

pytestmark = pytest.mark.e2e

SETTINGS = """
[observation_masking.schema1]
window_turns = 4
min_free_percent = 80
price_model = "anthropic"
"""


def test_get_options_gives_the_settings_files_values_and_set_still_wins(tmp_path: Path):
    (tmp_path / "mitm.toml").write_text(SETTINGS, encoding="utf-8")
    with running_mitmweb(["--set", "obsmask_price_model=openai"], tmp_path,
                         tmp_path / "confdir") as web:
        options = as_object(web.get_json("/options"))
        output = web.output()

    def shown(name: str) -> tuple[object, object]:
        option = as_object(options[name])
        return option["default"], option["value"]

    assert shown("obsmask_window_turns") == (4, 4)
    assert shown("obsmask_min_free_percent") == (80, 80)
    assert shown("obsmask_price_model") == ("anthropic", "openai")  # --set wins
    assert shown("obsmask_keep_errors") == (True, True)  # not in the file: built in
    assert "window 4 tool turns" in output and "price_model=openai" in output, output
