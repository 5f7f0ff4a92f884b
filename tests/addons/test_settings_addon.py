"""The settings addon in mitmproxy's test context: the master switch of both
features, the start-up lines that say where each value came from, unknown
``obsmask_*``/``mcpmask_*`` options, and how a wrong value is refused at
start-up (one line and an exit) and later (an OptionsError: mitmweb's
options editor refuses the value and the proxy runs on)."""

from __future__ import annotations

import logging

import pytest
from mitmproxy import exceptions
from mitmproxy.addons import errorcheck
from mitmproxy.test import taddons

from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.mcp_addon import McpTruncation
from obsmask_core.mitm.options import check_unknown_options, refuse, starting_up
from obsmask_core.mitm.recall_addon import Recall
from obsmask_core.mitm.settings_addon import SettingsFile


@pytest.fixture
def both(toml_file, caplog):
    """The settings addon and both features, as obsmask.py lists them."""
    settings = SettingsFile()
    masking, truncation = ConversationMasking(settings), McpTruncation(settings)
    with taddons.context(settings, masking, truncation) as tctx:
        with caplog.at_level(logging.INFO):
            yield masking, truncation, tctx


def start_up_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if "masking o" in r.getMessage() or "truncation o" in r.getMessage()]


def test_the_master_switch_turns_both_features_off(both, toml_file, caplog):
    masking, truncation, tctx = both
    tctx.configure(masking, obsmask_config=toml_file(""))
    assert masking.policy.enabled and truncation.limits.enabled
    caplog.clear()
    tctx.configure(masking, obsmask_all_enabled=False)
    assert not masking.policy.enabled and not truncation.limits.enabled
    assert start_up_lines(caplog) == [
        "obsmask: conversation masking off (settings: --set obsmask_all_enabled=false)",
        "obsmask: MCP truncation off (settings: --set obsmask_all_enabled=false)"]
    tctx.configure(masking, obsmask_all_enabled=True)
    assert masking.policy.enabled and truncation.limits.enabled


def test_the_master_switch_in_the_file_names_the_file(both, toml_file, caplog):
    masking, truncation, tctx = both
    path = toml_file("[obsmask]\nenabled = false\n[observation_masking.schema1]\n"
                     "window_turns = 2\n")
    tctx.configure(masking, obsmask_config=path)
    assert not masking.policy.enabled and masking.policy.window_turns == 2
    assert not truncation.limits.enabled
    assert start_up_lines(caplog)[-2:] == [
        f"obsmask: conversation masking off (settings: {path} [obsmask] enabled = false)",
        f"obsmask: MCP truncation off (settings: {path} [obsmask] enabled = false)"]


def test_each_feature_keeps_its_own_switch(both, toml_file, caplog):
    masking, truncation, tctx = both
    path = toml_file("[mcp_gateway.masking]\nenabled = false\n")
    tctx.configure(masking, obsmask_config=path, obsmask_enabled=False)
    assert not masking.policy.enabled and not truncation.limits.enabled
    lines = start_up_lines(caplog)
    assert "obsmask: conversation masking off (settings: --set obsmask_enabled=false)" in lines
    assert (f"obsmask: MCP truncation off (settings: {path} [mcp_gateway.masking] "
            "enabled = false)") in lines


def test_a_switch_the_file_does_not_hold_is_named_as_the_built_in_default(toml_file, caplog,
                                                                        tmp_path):
    """Recall is off by default: with no [recall] in the file, the start-up
    line must not cite a [recall] enabled = false that is not there."""
    path = toml_file("[observation_masking.schema1]\nwindow_turns = 2\n")
    settings = SettingsFile()
    recall = Recall(settings)
    with taddons.context(settings, recall) as tctx, caplog.at_level(logging.INFO):
        try:
            tctx.configure(recall, obsmask_config=path)
            said = [r.getMessage() for r in caplog.records if "recall o" in r.getMessage()]
            assert said == [f"obsmask: recall off (settings: built-in default, not set in "
                            f"{path})"]
            caplog.clear()
            tctx.configure(recall, obsmask_config=toml_file("[recall]\nenabled = false\n"))
            said = [r.getMessage() for r in caplog.records if "recall o" in r.getMessage()]
            assert said == [f"obsmask: recall off (settings: {path} [recall] enabled = false)"]
        finally:
            recall.done()


def test_a_switch_set_by_the_chosen_profile_names_the_profiles_table(both, toml_file, caplog):
    masking, _, tctx = both
    path = toml_file("[observation_masking.schema1]\nwindow_turns = 2\n"
                     "[observation_masking.profiles.off]\nenabled = false\n")
    tctx.configure(masking, obsmask_config=path, obsmask_profile="off")
    assert not masking.policy.enabled
    assert start_up_lines(caplog)[-2] == (
        f"obsmask: conversation masking off (settings: {path} "
        "[observation_masking.profiles.off] enabled = false)")


def test_the_start_up_line_names_the_file_only_for_values_from_it(both, toml_file, caplog):
    masking, _, tctx = both
    path = toml_file("[observation_masking.schema1]\nwindow_turns = 2\n")
    tctx.configure(masking, obsmask_config=path, mcpmask_max_chars=5000,
                   obsmask_window_turns=3)
    lines = start_up_lines(caplog)
    assert any(line.startswith("obsmask: conversation masking on: window 3 tool turns")
               and f"(settings: {path}, --set obsmask_window_turns" in line for line in lines)
    assert any("5,000 chars" in line and line.endswith(f"(settings: {path}, --set "
                                                       "mcpmask_max_chars)") for line in lines)


def test_an_unknown_option_is_refused_with_the_closest_name(both):
    _, _, tctx = both
    tctx.options.set("obsmask_window=3", "mcpmask_max_char=100", "other_addon_x=1",
                     defer=True)
    with pytest.raises(exceptions.OptionsError) as refused:
        check_unknown_options(tctx.options)
    assert str(refused.value) == (
        "obsmask: unknown option mcpmask_max_char (did you mean mcpmask_max_chars?)")
    del tctx.options.deferred["mcpmask_max_char"]
    with pytest.raises(exceptions.OptionsError, match=r"obsmask_window \(did you mean "
                                                      r"obsmask_window_turns\?\)"):
        check_unknown_options(tctx.options)
    del tctx.options.deferred["obsmask_window"]
    check_unknown_options(tctx.options)  # another script's option: not ours to judge


def test_at_start_up_a_refusal_is_one_line_and_an_exit(caplog):
    """While mitmproxy's errorcheck watches start-up, a wrong value is logged
    in one line (no traceback) and mitmproxy exits before it listens; once
    start-up is over (mitmweb's options editor) it is an OptionsError that
    refuses the value and leaves the proxy running."""
    with taddons.context() as tctx:
        assert not starting_up()
        check = errorcheck.ErrorCheck()
        tctx.master.addons.add(check)
        try:
            assert starting_up()
            with caplog.at_level(logging.ERROR), pytest.raises(SystemExit) as exited:
                refuse("obsmask: obsmask_window_turns: must be 0 or more, got -4")
            assert exited.value.code == 1
            [record] = caplog.records
            assert record.getMessage() == (
                "obsmask: obsmask_window_turns: must be 0 or more, got -4")
            assert record.exc_info is None
        finally:
            check.finish()
        assert not starting_up()
        with pytest.raises(exceptions.OptionsError, match="must be 0 or more"):
            refuse("obsmask: obsmask_window_turns: must be 0 or more, got -4")


def test_the_options_show_the_settings_files_values_as_their_defaults(both, toml_file):
    """The options editor (mitmweb's GET /options, --options) shows the
    values in force: a value from mitm.toml becomes the option's default, a
    key the file does not set keeps the built-in default."""
    masking, truncation, tctx = both
    path = toml_file("[observation_masking.schema1]\nwindow_turns = 4\nmin_free_percent = 80\n"
                     "exclude_tools = [\"read_file\"]\n"
                     "[mcp_gateway.masking]\nmax_chars = 12000\n")
    tctx.configure(masking, obsmask_config=path)
    options = tctx.options
    assert options.default("obsmask_window_turns") == 4
    assert options.default("obsmask_min_free_percent") == 80
    assert options.default("obsmask_exclude_tools") == ["read_file"]
    assert options.default("mcpmask_max_chars") == 12000
    assert options.default("obsmask_keep_errors") is True  # not in the file
    assert options.obsmask_window_turns == 4 and masking.policy.window_turns == 4
    assert truncation.limits.max_chars == 12000


def test_an_option_set_explicitly_still_wins_over_the_files_default(both, toml_file):
    masking, _, tctx = both
    path = toml_file("[observation_masking.schema1]\nwindow_turns = 4\n")
    tctx.configure(masking, obsmask_config=path, obsmask_window_turns=6)
    assert masking.policy.window_turns == 6
    assert tctx.options.obsmask_window_turns == 6
    assert tctx.options.default("obsmask_window_turns") == 4
    # Setting the built-in default explicitly is a choice too: it wins.
    tctx.configure(masking, obsmask_window_turns=8)
    assert masking.policy.window_turns == 8


def test_another_settings_file_moves_the_defaults_with_it(both, toml_file):
    masking, _, tctx = both
    tctx.configure(masking, obsmask_config=toml_file("[observation_masking.schema1]\n"
                                                     "window_turns = 4\n"))
    tctx.configure(masking, obsmask_config=toml_file(""))
    assert tctx.options.default("obsmask_window_turns") == 8
    assert masking.policy.window_turns == 8


def test_a_profile_s_values_become_the_defaults_too(both, toml_file):
    masking, _, tctx = both
    path = toml_file("[observation_masking.schema1]\nwindow_turns = 4\n"
                     "[observation_masking.profiles.wide]\nwindow_turns = 12\n")
    tctx.configure(masking, obsmask_config=path, obsmask_profile="wide")
    assert tctx.options.default("obsmask_window_turns") == 12
    assert masking.policy.window_turns == 12


def test_a_pair_holding_the_separator_keeps_the_built_in_default(both, toml_file):
    """An option shows a pair as FIRST|SECOND: a half holding "|" could not
    be read back, so that option's default is not moved (the file's value
    is still in force)."""
    masking, _, tctx = both
    path = toml_file("[observation_masking.schema1]\n"
                     "preserve_patterns = [[\"<a|b>\", \"</x>\"]]\n")
    tctx.configure(masking, obsmask_config=path)
    assert masking.policy.preserve_patterns == (("<a|b>", "</x>"),)
    assert tctx.options.default("obsmask_preserve_patterns") != ["<a|b>|</x>"]
