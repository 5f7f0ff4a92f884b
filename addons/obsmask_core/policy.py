"""The masking policy (spec 001 §4) and its placeholder template."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import TypeVar

_T = TypeVar("_T")

# Spec 001 §4.2 / guide 000: short, French, with the id, the tool and the size.
DEFAULT_PLACEHOLDER_TEMPLATE = (
    "[Observation masquée: résultat d'outil ancien "
    "(tool_call_id={tool_call_id}, outil={tool_name}, chars={original_chars})]"
)
PLACEHOLDER_FIELDS = ("tool_call_id", "tool_name", "original_chars")
# Spec 001 §4.2: "{tool_name} peut être `inconnu` si non résolvable".
UNKNOWN_TOOL_NAME = "inconnu"


class PolicyError(ValueError):
    """A policy value is invalid; ``key`` names the policy key at fault."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


def _template_fields(template: str) -> list[tuple[str, str | None, str | None, str | None]]:
    try:
        return list(string.Formatter().parse(template))
    except ValueError as e:
        raise PolicyError("placeholder_template", f"not a valid template ({e})") from e


def check_placeholder_template(template: str) -> None:
    """Raise PolicyError unless ``template`` uses only the known fields and renders."""
    for _literal, name, _spec, _conversion in _template_fields(template):
        if name is not None and name not in PLACEHOLDER_FIELDS:
            known = ", ".join("{" + f + "}" for f in PLACEHOLDER_FIELDS)
            shown = "{" + name + "}" if name else "{}"
            raise PolicyError(
                "placeholder_template", f"unknown field {shown}; the fields are {known}"
            )
    try:
        render_placeholder(template, "call_0", "tool", 12345)
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise PolicyError("placeholder_template", f"does not render ({e})") from e


def render_placeholder(
    template: str, tool_call_id: str, tool_name: str | None, original_chars: int
) -> str:
    return template.format(
        tool_call_id=tool_call_id,
        tool_name=tool_name if tool_name is not None else UNKNOWN_TOOL_NAME,
        original_chars=original_chars,
    )


class PlaceholderMatcher:
    """Recognises a placeholder rendered from one template, so masking is idempotent.

    A result whose text is already "the placeholder for this call" is left as it
    is: a retried or replayed request is then masked exactly like the first one,
    and the masked bytes stay stable from turn to turn (prompt caches key on them).
    """

    def __init__(self, template: str) -> None:
        pattern: list[str] = []
        self._fields: list[tuple[str, str | None, str | None]] = []
        for literal, name, spec, conversion in _template_fields(template):
            pattern.append(re.escape(literal))
            if name is not None:
                pattern.append("(.*?)")
                self._fields.append((name, spec, conversion))
        self._regex = re.compile("".join(pattern), re.DOTALL)

    def matches(self, text: str, tool_call_id: str, tool_name: str | None) -> bool:
        match = self._regex.fullmatch(text)
        if match is None:
            return False
        expected = {
            "tool_call_id": tool_call_id,
            "tool_name": tool_name if tool_name is not None else UNKNOWN_TOOL_NAME,
        }
        for (name, spec, conversion), captured in zip(self._fields, match.groups(), strict=False):
            if name == "original_chars":
                continue  # the size of a text we no longer have: any value is fine
            value = expected[name]
            if conversion == "r":
                value = repr(value)
            elif conversion == "a":
                value = ascii(value)
            if format(value, spec or "") != captured:
                return False
        return True


@dataclass(frozen=True)
class MaskPolicy:
    """Spec 001 §4.1. ``keep_last_k_per_tool`` of 0 or None means off (§7)."""

    enabled: bool = True
    window_turns: int = 8
    keep_errors: bool = True
    keep_last_k_per_tool: int | None = None
    placeholder_template: str = DEFAULT_PLACEHOLDER_TEMPLATE
    matcher: PlaceholderMatcher = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_placeholder_template(self.placeholder_template)
        object.__setattr__(self, "matcher", PlaceholderMatcher(self.placeholder_template))

    @property
    def per_tool_keep(self) -> int:
        return self.keep_last_k_per_tool or 0


# The keys of [observation_masking.schema1], with the type each must have.
POLICY_KEY_TYPES: dict[str, type] = {
    "enabled": bool,
    "window_turns": int,
    "keep_errors": bool,
    "keep_last_k_per_tool": int,
    "placeholder_template": str,
}


def check_policy_value(key: str, value: object) -> None:
    """Raise PolicyError if ``value`` is not acceptable for policy ``key``."""
    expected = POLICY_KEY_TYPES.get(key)
    if expected is None:
        known = ", ".join(POLICY_KEY_TYPES)
        raise PolicyError(key, f"unknown key; the keys are {known}")
    # bool is a subclass of int: `window_turns = true` must not pass as 1.
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise PolicyError(
            key, f"must be {_type_word(expected)}, got {_type_word(type(value))} {value!r}"
        )
    if expected is int and isinstance(value, int) and value < 0:
        raise PolicyError(key, f"must be 0 or more, got {value}")
    if key == "placeholder_template" and isinstance(value, str):
        check_placeholder_template(value)


def _type_word(kind: type) -> str:
    return {bool: "a boolean", int: "an integer", str: "a string"}.get(
        kind, f"a {kind.__name__}"
    )


def policy_from_values(values: dict[str, object]) -> MaskPolicy:
    """Build a policy from key/value pairs; missing keys take the defaults."""
    for key, value in values.items():
        check_policy_value(key, value)
    defaults = MaskPolicy()

    def pick(key: str, kind: type[_T], default: _T) -> _T:
        value = values.get(key, default)
        return value if isinstance(value, kind) else default

    return MaskPolicy(
        enabled=pick("enabled", bool, defaults.enabled),
        window_turns=pick("window_turns", int, defaults.window_turns),
        keep_errors=pick("keep_errors", bool, defaults.keep_errors),
        keep_last_k_per_tool=pick("keep_last_k_per_tool", int, 0) or None,
        placeholder_template=pick(
            "placeholder_template", str, defaults.placeholder_template
        ),
    )
