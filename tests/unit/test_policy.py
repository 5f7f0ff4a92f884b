"""The masking policy's settings (``conversation/settings/policy.py``): read from TOML
values, refused when wrong, overlaid by a profile of the settings file (every
profile checked), the placeholder rendered, and the shipped ``mitm.toml``
valid."""

from __future__ import annotations

import pytest

from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values, render_placeholder
from obsmask_core.shared.config_file import ConfigFile, load_config
from obsmask_core.shared.errors import ConfigError, SettingError
from obsmask_core.shared.settings import build, check_value


def test_the_cache_and_budget_keys_are_read_from_toml_values():
    policy = build(MaskPolicy, {
        "batch_turns": 10, "trigger_tokens": 5000, "min_chars": 800,
        "exclude_tools": ["read_file"], "min_free_percent": 30, "max_input_tokens": 90_000,
        "preserve_patterns": [["<keep>", "</keep>"]],
    })
    assert policy.batch_turns == 10 and policy.exclude_tools == ("read_file",)
    assert policy.preserve_patterns == (("<keep>", "</keep>"),)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("batch_turns", 0, "must be 1 or more"),
    ("exclude_tools", "read_file", "must be an array of strings"),
    ("preserve_patterns", [["only-begin"]], "pairs"),
    ("max_input_tokens", -1, "must be 0 or more"),
])
def test_wrong_values_of_the_cache_and_budget_keys_are_refused(key, value, message):
    with pytest.raises(SettingError, match=message):
        check_value(MaskPolicy, key, value)


def test_shipped_settings_file_is_valid_and_has_the_no_cache_profile():
    from obsmask_core.conversation.settings.policy import policy_values
    from obsmask_core.shared.config_file import load_config
    from obsmask_core.shared.settings import build
    from support.processes import REPO

    config = load_config(str(REPO / "mitm.toml"))
    recommended = build(MaskPolicy, policy_values(config, ""))
    assert recommended.enabled and recommended.payback_factor > 0
    no_cache = build(MaskPolicy, policy_values(config, "no_cache"))
    assert no_cache.min_free_percent == 0 and no_cache.batch_turns == 1


def test_a_chosen_profile_overlays_the_schema1_table(toml_file):
    config = load_config(toml_file(
        "[observation_masking.schema1]\nwindow_turns = 4\nmin_chars = 10\n"
        "[observation_masking.profiles.short]\nwindow_turns = 1\n"))
    assert policy_values(config, "") == {"window_turns": 4, "min_chars": 10}
    assert policy_values(config, "short") == {"window_turns": 1, "min_chars": 10}


def test_every_profile_is_checked_even_when_not_chosen(toml_file):
    path = toml_file("[observation_masking.profiles.broken]\nwindow_turns = -1\n")
    with pytest.raises(ConfigError) as raised:
        policy_values(load_config(path), "")
    assert str(raised.value).startswith(
        f"{path}:2: [observation_masking.profiles.broken] window_turns: must be 0 or more")


def test_an_unknown_profile_is_an_error_listing_the_profiles(toml_file):
    path = toml_file("[observation_masking.profiles.b]\n[observation_masking.profiles.a]\n")
    with pytest.raises(ConfigError) as raised:
        policy_values(load_config(path), "c")
    assert str(raised.value) == f"{path}: no profile 'c' (profiles: a, b)"
    with pytest.raises(ConfigError, match=r"built-in defaults: no profile 'c' \(profiles: none\)"):
        policy_values(ConfigFile(path=None), "c")


def test_the_placeholder_names_an_unknown_tool_inconnu():
    assert render_placeholder("{tool_call_id}/{tool_name}/{original_chars:,}", "c1", None,
                              12345) == "c1/inconnu/12,345"


@pytest.mark.parametrize(
    ("template", "message"),
    [("{tool}", "unknown field {tool}"), ("{original_chars:q}", "does not render"),
     ("{tool_call_id!x}", "does not render")],
)
def test_a_placeholder_template_that_cannot_render_is_refused(template, message):
    with pytest.raises(SettingError) as raised:
        MaskPolicy(placeholder_template=template)
    assert raised.value.key == "placeholder_template" and message in raised.value.message
