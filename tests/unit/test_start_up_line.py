"""The start-up line (``summary.describe_policy``): what conversation
masking will do, and from where, naming every setting that is not at its
neutral value, and no other."""

from __future__ import annotations

from obsmask_core.conversation.masking.summary import describe_policy
from obsmask_core.conversation.settings.policy import MaskPolicy


def test_the_spec_window_names_only_its_own_settings():
    assert describe_policy(MaskPolicy(), "built-in defaults") == (
        "conversation masking on: window 8 tool turns, keep_errors=on, "
        "keep_last_k_per_tool=0 (settings: built-in defaults)")


def test_the_cache_settings_are_named_when_they_act():
    policy = MaskPolicy(window_turns=1, min_free_percent=20, payback_factor=8,
                        price_model="auto", allowance_percent=2, frontier_breakpoint=True,
                        cold_after_seconds=360)
    line = describe_policy(policy, "mitm.toml")
    assert line.endswith(", min_free_percent=20, payback_factor=8, price_model=auto, "
                         "allowance_percent=2, "
                         "frontier_breakpoint=on, cold_turns=on, cold_after_seconds=360 "
                         "(settings: mitm.toml)")


def test_masking_off_says_so_and_nothing_else():
    assert describe_policy(MaskPolicy(enabled=False), "mitm.toml") == (
        "conversation masking off (settings: mitm.toml)")
