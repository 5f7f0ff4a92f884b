"""The documentation site (mkdocs.yml, docs/) builds with ``mkdocs build
--strict``: a broken link or anchor, or a page left out of the navigation,
fails the build and so this test.

mkdocs and the Material theme come with the test environment
(pyproject.toml's ``test`` group); the build is bounded in time and writes
into a temporary folder, never into the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.processes import REPO

MKDOCS_TIMEOUT = 180.0


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of the site at ``root``, into ``site``."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        pytest.fail(f"mkdocs is not installed next to {sys.executable} "
                    "(run the tests with scripts/test.py)")
    return subprocess.run(
        [str(mkdocs), "build", "--strict", "--config-file", str(root / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=root, capture_output=True, text=True, timeout=MKDOCS_TIMEOUT, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def copy_of_the_site(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(REPO / "docs", root / "docs")
    return root


def test_the_documentation_site_builds_in_strict_mode(tmp_path):
    done = build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("index.html", "configuration/index.html", "recipes/claude-code/index.html",
                 "benchmarks/index.html", "contributing/index.html"):
        assert (tmp_path / "site" / page).exists(), page


def test_a_broken_link_fails_the_build(tmp_path):
    root = copy_of_the_site(tmp_path)
    page = root / "docs" / "recall.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [nowhere](no-such-page.md).\n",
                    encoding="utf-8")
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stdout + done.stderr


def test_a_broken_anchor_fails_the_build(tmp_path):
    root = copy_of_the_site(tmp_path)
    page = root / "docs" / "recall.md"
    page.write_text(page.read_text(encoding="utf-8")
                    + "\nSee [the table](configuration.md#no-such-heading).\n", encoding="utf-8")
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-heading" in done.stdout + done.stderr


def test_a_page_missing_from_the_navigation_fails_the_build(tmp_path):
    root = copy_of_the_site(tmp_path)
    (root / "docs" / "orphan.md").write_text("# An orphan page\n", encoding="utf-8")
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    assert "orphan.md" in done.stdout + done.stderr
