"""A real headless Chromium for the tests that check what a page renders.

Chromium comes from the system's packages (Debian's ``chromium``); where it
is missing the test is skipped with a message that says how to get it. It is
started with the flags that keep it off the network (this machine has none
but the package registries) and with a fresh profile each time, in a process
group of its own that is killed, by its id, when the page is done or the
time is up.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
)
TIMEOUT_SECONDS = 60.0


def chromium() -> str:
    """The Chromium program, or skip the test saying how to install it."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found is not None:
            return found
    pytest.skip("Chromium is not installed (Debian: apt-get install chromium); "
                "the tests that open a page in a real browser are skipped")


def _run(arguments: list[str], profile: Path) -> str:
    process = subprocess.Popen(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", *arguments],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = process.communicate(timeout=TIMEOUT_SECONDS)
    finally:
        # Chromium leaves helper processes (zygote, renderer) in its group.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    return out.decode("utf-8", "replace")


# On a loaded machine a web app (mitmweb: its state comes over a
# WebSocket) was seen still empty when a 5 s budget was spent; a fresh
# browser with a longer budget is tried before the test decides.
LONGER_BUDGETS_MS = (15000, 30000)


def rendered_dom(url: str, workdir: Path, *, wait_ms: int = 5000,
                 showing: str | None = None) -> str:
    """The page's DOM after its scripts ran for ``wait_ms`` of virtual time.

    With ``showing``, a DOM without that text is rendered again, in a fresh
    profile, with a longer budget, twice at most; the last DOM is returned
    whatever it holds, so the caller's assertion still decides."""
    dom = ""
    budgets = (wait_ms, *(max(wait_ms, longer) for longer in LONGER_BUDGETS_MS))
    for attempt, budget in enumerate(budgets):
        dom = _run([f"--virtual-time-budget={budget}", "--dump-dom", url],
                   workdir / f"chromium-profile-dom-{attempt}")
        if showing is None or showing in dom:
            break
    return dom


def screenshot(url: str, png: Path, *, size: tuple[int, int] = (1400, 1000),
               wait_ms: int = 5000) -> Path:
    """A PNG of the page as the browser drew it; fails if none was written."""
    _run([f"--window-size={size[0]},{size[1]}", f"--virtual-time-budget={wait_ms}",
          f"--screenshot={png}", url], png.parent / "chromium-profile-shot")
    assert png.is_file() and png.stat().st_size > 0, f"Chromium wrote no screenshot of {url}"
    return png
