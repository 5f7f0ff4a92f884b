"""The masking policies bench_cache compares: the built-in ones, the settings
file's, and those of ``--policy`` options."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

import tomli

from _bootstrap import REPO
from benchlib.errors import BenchError
from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values
from obsmask_core.offline.cache.family_replay import ONE_PRICE_POLICY
from obsmask_core.offline.cache.policy_json import policy_settings
from obsmask_core.shared.config_file import load_config
from obsmask_core.shared.errors import ConfigError, SettingError
from obsmask_core.shared.settings import build

__all__ = ["BASELINE", "NO_COLD_TURNS", "PAUSE_POLICY", "ComparedPolicy", "compared_policies",
           "parse_policy_option", "pause_policies", "policy_settings"]

BASELINE = "none"  # ratios are to this policy's cost on the same session
# The policy named "spec", a plain sliding window: at every request, every
# tool result older than the last 8 tool turns is masked, with no pay-off
# rule and no batching (the rule obsmask started from).
SLIDING_WINDOW_TURNS = 8
# The setting by which obsmask adds a cache breakpoint of its own to
# Anthropic requests. Until MaskPolicy has it, the policy without it is not
# listed, and "spec" is built without it.
FRONTIER_BREAKPOINT = "frontier_breakpoint"
NO_FRONTIER_BREAKPOINT = "recommended_no_frontier_breakpoint"
# The pause families (benchlib.cache.pauses) are replayed under the shipped
# settings, and under the same without cold turns: what cold turns save.
PAUSE_POLICY = "recommended"
NO_COLD_TURNS = "recommended_no_cold_turns"


def has_setting(name: str) -> bool:
    return any(f.name == name for f in fields(MaskPolicy) if f.init)


@dataclass(frozen=True)
class ComparedPolicy:
    policy: MaskPolicy
    source: str  # where it comes from, for the report


def compared_policies(config_path: Path) -> dict[str, ComparedPolicy]:
    """name -> policy. "recommended" is what the settings file (mitm.toml)
    gives the addon, "recommended_no_frontier_breakpoint" the same with
    ``frontier_breakpoint = false`` (only once MaskPolicy has that setting:
    the rule without obsmask's own breakpoint, beside it), and
    "no_cache_profile" the same with its no_cache profile: read by the
    addon's own loader, so the benchmark measures exactly the settings that
    ship.

    "spec" must stay a plain sliding window (its name is the one the reports
    have always used): if MaskPolicy gains a field whose default is not
    neutral, set it to neutral here (no breakpoint of obsmask's own)."""
    label = str(
        config_path.relative_to(REPO) if config_path.resolve().is_relative_to(REPO) else config_path
    )
    frontier = has_setting(FRONTIER_BREAKPOINT)
    off: dict[str, object] = {FRONTIER_BREAKPOINT: False} if frontier else {}
    try:
        config = load_config(str(config_path))
        values = policy_values(config, "")
        recommended = build(MaskPolicy, values)
        without_breakpoint = build(MaskPolicy, {**values, **off})
        no_cache = build(MaskPolicy, policy_values(config, "no_cache"))
        spec = build(MaskPolicy, {"window_turns": SLIDING_WINDOW_TURNS, **off})
    except (ConfigError, SettingError) as e:
        raise BenchError(str(e)) from e
    section = f"{label} [observation_masking.schema1]"
    compared = {
        BASELINE: ComparedPolicy(MaskPolicy(enabled=False), "built in: masking off"),
        # (This source text is printed in the JSON output.)
        "spec": ComparedPolicy(spec, "built in: the plain sliding window of 8 tool turns"),
        "recommended": ComparedPolicy(recommended, section),
    }
    if frontier:
        compared[NO_FRONTIER_BREAKPOINT] = ComparedPolicy(
            without_breakpoint, f"{section} with frontier_breakpoint = false")
    compared[ONE_PRICE_POLICY] = ComparedPolicy(
        recommended, f"{section} with one price per provider, as before prices per model: "
                     "price_model \"anthropic\" for Anthropic families, \"openai\" for OpenAI's")
    compared["no_cache_profile"] = ComparedPolicy(
        no_cache, f"{section} + [observation_masking.profiles.no_cache]")
    return compared


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets and quotes (``a=1,b=["x","y"]``)."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    current: list[str] = []
    for char in text:
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def _toml_value(text: str) -> object:
    """A TOML scalar or array; a bare word that is not TOML is a string."""
    try:
        value: object = tomli.loads(f"v = {text.strip()}")["v"]
    except tomli.TOMLDecodeError:
        return text.strip()
    return value


def parse_policy_option(option: str) -> tuple[str, ComparedPolicy]:
    """``NAME=key=value,key=value`` -> (NAME, policy). Values are TOML
    (``batch_turns=10``, ``exclude_tools=["read_file"]``, ``keep_errors=false``);
    an unquoted word is taken as a string."""
    name, equals, spec = option.partition("=")
    if not name.strip() or not equals:
        raise BenchError(f"--policy {option!r}: expected NAME=key=value,...")
    values: dict[str, object] = {}
    for part in _split_top_level(spec):
        key, equals, value = part.partition("=")
        if not equals:
            raise BenchError(f"--policy {option!r}: {part!r} is not key=value")
        values[key.strip()] = _toml_value(value)
    try:
        policy = build(MaskPolicy, values)
    except SettingError as e:
        raise BenchError(f"--policy {name}: {e}") from e
    return name.strip(), ComparedPolicy(policy, f"command line: {spec or '(defaults)'}")


def pause_policies(compared: dict[str, ComparedPolicy]) -> dict[str, ComparedPolicy]:
    """The policies the pause families are replayed under: no masking, the
    shipped settings (``PAUSE_POLICY``, as ``--policy`` may have replaced
    them) and the same with ``cold_turns = false`` and
    ``cold_after_seconds = 0`` (``NO_COLD_TURNS``: the cache counted as
    warm at every request, as before cold turns)."""
    shipped = compared[PAUSE_POLICY]
    return {
        BASELINE: compared[BASELINE],
        PAUSE_POLICY: shipped,
        NO_COLD_TURNS: ComparedPolicy(
            replace(shipped.policy, cold_turns=False, cold_after_seconds=0),
            f"{shipped.source} with cold_turns = false and cold_after_seconds = 0"),
    }
