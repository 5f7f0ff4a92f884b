"""The settings measure.py masks with and report.py replays under
(``scripts/benchlib/proxy_settings.py``): the proxy's precedence (defaults
< the settings file < its profile < ``--set``), the proxy's option names
and value syntax, the master switch, the routes, and one line for an
unknown option or a wrong value (each script puts its name before it)."""

from __future__ import annotations

import re

import pytest

from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values
from obsmask_core.offline.proxy_settings import SettingsRefused, settings_in_force
from obsmask_core.shared.config_file import RECOMMENDED_CONFIG, load_config
from obsmask_core.shared.settings import build, declared

FILE = """
[observation_masking.schema1]
window_turns = 4
keep_errors = false
[observation_masking.profiles.narrow]
window_turns = 3
"""


def test_without_a_file_the_recommended_settings_apply_as_in_the_proxy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no mitm.toml here
    settings = settings_in_force([])
    assert settings.policy == build(MaskPolicy, policy_values(load_config(
        str(RECOMMENDED_CONFIG)), ""))
    assert settings.policy.window_turns == 1
    assert settings.source == "obsmask's recommended settings (no mitm.toml here)"


def test_the_spec_profile_gives_the_built_in_defaults_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert settings_in_force([], profile="spec").policy == MaskPolicy()


def test_the_file_in_the_current_directory_is_read_as_the_proxy_reads_it(
        tmp_path, monkeypatch):
    (tmp_path / "mitm.toml").write_text(FILE)
    monkeypatch.chdir(tmp_path)
    settings = settings_in_force([])
    assert (settings.policy.window_turns, settings.policy.keep_errors) == (4, False)
    assert settings.source == "mitm.toml"
    assert settings.line.startswith("conversation masking on: window 4 tool turns, "
                                    "keep_errors=off")


def test_the_profile_wins_over_the_file_and_set_wins_over_both(toml_file):
    path = toml_file(FILE)
    assert settings_in_force([], path).policy.window_turns == 4
    assert settings_in_force([], path, "narrow").policy.window_turns == 3
    chosen = settings_in_force(["obsmask_window_turns=2"], path, "narrow")
    assert chosen.policy.window_turns == 2
    assert chosen.policy.keep_errors is False  # the file's, not overridden
    assert chosen.source == f"{path}, profile narrow, --set obsmask_window_turns"


def test_set_obsmask_config_and_profile_are_the_same_as_the_flags(toml_file):
    path = toml_file(FILE)
    by_options = settings_in_force([f"obsmask_config={path}", "obsmask_profile=narrow"])
    assert by_options.policy == settings_in_force([], path, "narrow").policy


def test_set_values_take_the_proxys_syntax(toml_file):
    settings = settings_in_force([
        "obsmask_keep_errors",  # a bool with no value: true, as in mitmproxy
        "obsmask_exclude_tools=read_file", "obsmask_exclude_tools=grep",
        "obsmask_preserve_patterns=<keep>|</keep>",
        "obsmask_price_model=openai",
    ], toml_file(FILE))
    policy = settings.policy
    assert policy.keep_errors is True
    assert policy.exclude_tools == ("read_file", "grep")
    assert policy.preserve_patterns == (("<keep>", "</keep>"),)
    assert policy.price_model == "openai"


def test_every_setting_the_policy_declares_is_an_option(toml_file):
    """Nothing re-listed: each key of MaskPolicy is taken as obsmask_<key>."""
    path = toml_file("")
    for item in declared(MaskPolicy):
        if item.kind in ("strings", "pairs"):
            continue  # arrays: tested above
        value = str(item.default).lower() if item.kind == "bool" else str(item.default)
        settings = settings_in_force([f"obsmask_{item.key}={value}"], path)
        assert getattr(settings.policy, item.key) == item.default, item.key
        assert settings.source.endswith(f"--set obsmask_{item.key}"), item.key


def test_the_routes_say_which_requests_are_conversations(toml_file):
    settings = settings_in_force(["obsmask_chat_route=/llm/chat$",
                                  "obsmask_hosts=^api\\.example\\.com$"], toml_file(""))
    assert settings.routes.format_of("POST", "/llm/chat", "api.example.com") is not None
    assert settings.routes.format_of("POST", "/v1/chat/completions", "api.example.com") is None
    assert settings.routes.format_of("POST", "/llm/chat", "other.example.com") is None


def test_the_master_switch_turns_masking_off_and_says_where(toml_file):
    by_option = settings_in_force(["obsmask_all_enabled=false"], toml_file(""))
    assert not by_option.policy.enabled
    assert by_option.line == ("conversation masking off "
                              "(settings: --set obsmask_all_enabled=false)")
    path = toml_file("[obsmask]\nenabled = false\n")
    by_file = settings_in_force([], path)
    assert not by_file.policy.enabled
    assert by_file.source == f"{path} [obsmask] enabled = false"
    assert settings_in_force(["obsmask_all_enabled=true"], path).policy.enabled


def test_a_profile_that_turns_masking_off_is_named_as_the_table_that_says_so(toml_file):
    path = toml_file("[observation_masking.schema1]\nenabled = true\n"
                     "[observation_masking.profiles.off]\nenabled = false\n")
    settings = settings_in_force([], path, "off")
    assert not settings.policy.enabled
    assert settings.source == f"{path} [observation_masking.profiles.off] enabled = false"


def test_options_of_the_proxys_other_features_are_accepted_and_named(toml_file):
    settings = settings_in_force(["mcpmask_max_chars=5000", "obsmask_window_turns=2"],
                                 toml_file(""))
    assert settings.ignored == ("mcpmask_max_chars",)
    assert settings.source.endswith("--set obsmask_window_turns")


# mitmproxy's own words for a value it cannot parse (11 and 12 word them differently).
NOT_AN_INTEGER = r"(Not an integer|Failed to parse option \S+: not an integer): "


@pytest.mark.parametrize(("options", "message"), [
    (["obsmask_window_turn=4"],
     r"unknown option obsmask_window_turn \(did you mean obsmask_window_turns\?\)"),
    (["listen_port=8080"], r"unknown option listen_port \(not an option of obsmask; "
                           r"they are in the README's settings tables\)"),
    (["obsmask_window_turns=ten"],
     rf"--set obsmask_window_turns=ten: {NOT_AN_INTEGER}ten"),
    (["obsmask_window_turns=-1"], r"obsmask_window_turns: must be 0 or more, got -1"),
    (["obsmask_keep_errors=maybe"], r'--set obsmask_keep_errors=maybe: .*"true", '
                                    r'"false", or have the value omitted.*'),
    (["obsmask_price_model=cheap"], r"obsmask_price_model: must be one of anthropic, "
                                    r"openai, openai_50, none, auto, got 'cheap'"),
    (["mcpmask_max_chars=many"], rf"--set mcpmask_max_chars=many: {NOT_AN_INTEGER}many"),
])
def test_a_wrong_option_is_refused_with_one_line(toml_file, options, message):
    with pytest.raises(SettingsRefused) as refused:
        settings_in_force(options, toml_file(""))
    assert re.fullmatch(message, str(refused.value)), str(refused.value)


def test_a_wrong_file_or_profile_is_refused_with_one_line(tmp_path, toml_file):
    missing = str(tmp_path / "nope.toml")
    with pytest.raises(SettingsRefused, match=rf"^{re.escape(missing)}: configuration file "
                                              r"not found$"):
        settings_in_force([], missing)
    path = toml_file(FILE)
    with pytest.raises(SettingsRefused, match=rf"^{re.escape(path)}: no profile 'wide' "
                                              r"\(profiles: narrow\)$"):
        settings_in_force([], path, "wide")
    path = toml_file('[observation_masking.schema1]\nwindow_turns = "4"\n')
    with pytest.raises(SettingsRefused, match=rf"^{re.escape(path)}:2: "
                                              r"\[observation_masking\.schema1\] "
                                              r"window_turns: must be an integer"):
        settings_in_force([], path)


def test_the_file_read_the_profile_chosen_and_the_master_switch_are_kept_for_the_caller(
        tmp_path, monkeypatch, toml_file):
    """report.py says in its own words where the values come from: the
    settings in force carry the file, the profile and the master switch."""
    path = toml_file(FILE + "[obsmask]\nenabled = false\n")
    settings = settings_in_force(["obsmask_profile=narrow"], path)
    assert (settings.config.path, settings.profile, settings.switch.enabled) == (
        path, "narrow", False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # no mitm.toml here: the recommended settings
    without = settings_in_force([])
    assert (without.config.recommended, without.profile, without.switch.enabled) == (
        True, "", True)
