"""The settings file's check in the proxy: the tables it knows
(``mitm/file_tables.py``) are exactly those the features read, and a name
it does not know is refused like a wrong value, with the file and the line
(at start-up: one line and an exit, tests/e2e/test_e2e_mitmdump.py)."""

from __future__ import annotations

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons

from obsmask_core.mitm.addons import obsmask_addons
from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.file_tables import FILE_TABLES
from obsmask_core.mitm.recall_addon import Recall
from obsmask_core.mitm.settings_addon import SettingsFile
from obsmask_core.offline.proxy_settings import settings_in_force
from obsmask_core.shared.config_file import RECOMMENDED_CONFIG, ConfigFile

PROFILE = "no_cache"


@pytest.fixture
def tables_read(monkeypatch: pytest.MonkeyPatch) -> set[tuple[str, ...]]:
    """Every table a feature asks the settings file for (every read goes
    through ``ConfigFile.table``)."""
    read: set[tuple[str, ...]] = set()
    table = ConfigFile.table

    def recorded(self: ConfigFile, names: tuple[str, ...]) -> dict[str, object]:
        read.add(names)
        return table(self, names)

    monkeypatch.setattr(ConfigFile, "table", recorded)
    return read


def test_the_check_knows_exactly_the_tables_that_the_features_read(tables_read):
    """A feature that reads a table the check does not know would see it
    refused; a table the check knows that no feature reads would be
    accepted and ignored: either is a table missing from FILE_TABLES or
    left there."""
    addons = obsmask_addons()
    with taddons.context(*addons) as tctx:
        tctx.configure(addons[0], obsmask_config=str(RECOMMENDED_CONFIG),
                       obsmask_profile=PROFILE)
        for addon in addons:
            if isinstance(addon, Recall):
                addon.done()
    settings_in_force([], str(RECOMMENDED_CONFIG), PROFILE)
    profiles = {table.names for table in FILE_TABLES if table.named}
    # A profile's table is read by its name, as the check knows it.
    read = {names[:-1] if names[:-1] in profiles else names for names in tables_read}
    assert read == {table.names for table in FILE_TABLES}


def test_a_misspelled_section_is_refused_with_the_file_its_line_and_the_closest_name(
        toml_file):
    path = toml_file("[obsmask]\nenabled = true\n[recal]\nenabled = true\n")
    settings = SettingsFile()
    masking = ConversationMasking(settings)
    with taddons.context(settings, masking) as tctx:
        with pytest.raises(exceptions.OptionsError) as refused:
            tctx.configure(masking, obsmask_config=path)
    assert str(refused.value) == (
        f"obsmask: {path}:3: unknown table [recal] (did you mean [recall]?)")


def test_the_offline_commands_refuse_the_same_file_with_the_same_words(toml_file):
    from obsmask_core.offline.proxy_settings import SettingsRefused

    path = toml_file("[observation_masking.schema]\nwindow_turns = 3\n")
    with pytest.raises(SettingsRefused) as refused:
        settings_in_force([], path)
    assert str(refused.value) == (
        f"{path}:1: unknown table [observation_masking.schema] "
        "(did you mean [observation_masking.schema1]?)")
