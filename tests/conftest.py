"""Fixtures shared by the addon tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def toml_file(tmp_path: Path) -> Callable[[str], str]:
    """Write a settings file (mitm.toml) with the given text; its path."""

    def write(text: str) -> str:
        path = tmp_path / "mitm.toml"
        path.write_text(text, encoding="utf-8")
        return str(path)

    return write
