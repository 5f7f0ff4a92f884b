#!/usr/bin/env python3
"""What obsmask does to the bill of your own sessions, estimated by a replay.

The same as the installed ``obsmask measure`` command, in a checkout:

    python3 scripts/measure.py --help

Its code lives in the package (``obsmask_core.offline.commands`` and
``obsmask_core/offline/measure/``), whose docstring says what it does.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from obsmask_core.offline.commands import measure_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(measure_main(prog="measure.py"))
