"""The master switch of both features (``[obsmask] enabled``,
``obsmask_all_enabled``), declared once: the settings addon registers its
option, and the settings file's check knows its table."""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.shared.settings import check_fields, setting

SWITCH_PREFIX = "obsmask_"
SWITCH_SECTION = ("obsmask",)
SWITCH_OPTION = "obsmask_all_enabled"


@dataclass(frozen=True, kw_only=True)
class MasterSwitch:
    """The keys of ``[obsmask]``: what holds for the whole of obsmask."""

    enabled: bool = setting(True, """
        Master switch of both features. false turns conversation masking and
        MCP truncation off whatever their own switches say (obsmask_enabled,
        mcpmask_enabled): every request and answer is forwarded byte for byte.
        An instant rollback.""", option="all_enabled")

    def __post_init__(self) -> None:
        check_fields(self)
