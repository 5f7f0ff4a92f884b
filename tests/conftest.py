"""Fixtures shared by the tests."""

from __future__ import annotations

import difflib
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


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The lengths (lines a side) of every pair of texts difflib compares:
    the content view's work, counted rather than timed."""
    calls: list[tuple[int, int]] = []

    class Counted(difflib.SequenceMatcher):  # type: ignore[type-arg]
        def set_seqs(self, a, b):  # type: ignore[no-untyped-def]
            calls.append((len(a), len(b)))
            super().set_seqs(a, b)

    monkeypatch.setattr(difflib, "SequenceMatcher", Counted)
    return calls
