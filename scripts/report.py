#!/usr/bin/env python3
"""One self-contained HTML page with pictures of what obsmask did.

The same as the installed ``obsmask report`` command, in a checkout:

    python3 scripts/report.py --help

Its code lives in the package (``obsmask_core.offline.commands`` and
``obsmask_core/offline/report/``), whose docstring says what it does.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from obsmask_core.offline.commands import report_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(report_main(prog="report.py"))
