"""The benchmark sessions by shape, and the settings they are masked under
(``scripts/compare_fast_path.py``, ``scripts/outputs_digest.py``)."""

from __future__ import annotations

from pathlib import Path

from benchlib.cache.claude_code import claude_code_sessions
from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values
from obsmask_core.offline.cache.sessions import Session, load_real_sessions
from obsmask_core.shared.config_file import load_config
from obsmask_core.shared.settings import build


def settings(config: Path) -> dict[str, MaskPolicy]:
    """The shipped settings and each profile's, by name."""
    loaded = load_config(str(config))
    names = ["", *loaded.table(("observation_masking", "profiles"))]
    return {name or "shipped": build(MaskPolicy, policy_values(loaded, name))
            for name in names}


def shaped(folder: Path, per_shape: int | None = None) -> dict[str, list[Session]]:
    """The real sessions of ``folder`` by wire format, and Claude Code's
    shape made from the Anthropic ones; the first ``per_shape`` of each
    (None: all)."""
    out: dict[str, list[Session]] = {}
    for session in load_real_sessions(folder):
        out.setdefault(session.fmt.name, []).append(session)
    out["claude_code"] = claude_code_sessions(out.get("anthropic", []))
    return {shape: sessions[:per_shape] for shape, sessions in out.items()}
