"""Fixtures the unit tests share."""

from __future__ import annotations

import pytest

from obsmask_core.conversation.frontier.frontier import Frontier


@pytest.fixture
def restores(monkeypatch) -> list[object]:
    """The checkpoints replays resume from."""
    calls: list[object] = []
    original = Frontier._restore

    def spy(self, resume):
        calls.append(resume)
        original(self, resume)

    monkeypatch.setattr(Frontier, "_restore", spy)
    return calls
