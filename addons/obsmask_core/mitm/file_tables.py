"""Every table of the settings file that obsmask reads, in one place, each
with the settings class that declares its keys: the file's check
(``shared/table_check.py``) refuses any other table or key, so a misspelt
one stops start-up instead of leaving its feature on the defaults.
tests/addons/test_file_tables_read.py fails when a feature reads a table that is
not here, or one here is read by none."""

from __future__ import annotations

from obsmask_core.conversation.settings.policy import POLICY_SECTION, PROFILES_SECTION, MaskPolicy
from obsmask_core.gateway.upstreams import (
    GATEWAY_SECTION,
    SERVERS_SECTION,
    GatewaySettings,
    check_server,
)
from obsmask_core.mcp.limits import MASKING_SECTION, TruncationLimits
from obsmask_core.recall.settings import RECALL_SECTION, RecallSettings
from obsmask_core.shared.master_switch import SWITCH_SECTION, MasterSwitch
from obsmask_core.shared.table_check import FileTable
from obsmask_core.totals.settings import TOTALS_SECTION, TotalsSettings

FILE_TABLES = (
    FileTable(SWITCH_SECTION, MasterSwitch),
    FileTable(POLICY_SECTION, MaskPolicy),
    # [observation_masking.profiles.NAME], each with the keys of schema1.
    FileTable(PROFILES_SECTION, MaskPolicy, named=True),
    FileTable(GATEWAY_SECTION, GatewaySettings),
    FileTable(MASKING_SECTION, TruncationLimits),
    # NAME = "URL", one per server.
    FileTable(SERVERS_SECTION, entry=check_server),
    FileTable(RECALL_SECTION, RecallSettings),
    FileTable(TOTALS_SECTION, TotalsSettings),
)


def inner_tables(names: tuple[str, ...]) -> tuple[str, ...]:
    """The names of the tables right inside table ``names`` (read apart
    from its keys)."""
    return tuple(table.names[-1] for table in FILE_TABLES
                 if len(table.names) == len(names) + 1 and table.names[:-1] == names)
