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


DEFAULT_PRESERVE_PATTERNS = (("BEGIN_DISPATCH_RESULT", "END_DISPATCH_RESULT"),)


@dataclass(frozen=True)
class MaskPolicy:
    """What to mask. The first five fields are spec 001 §4.1
    (``keep_last_k_per_tool`` of 0 or None means off, §7); the others make
    masking cache-aware and budgeted, and are neutral at these values except
    ``preserve_patterns``, which only acts on results holding such a block:

    - ``batch_turns``: the masking frontier moves in steps of this many tool
      turns, so the masked prefix stays byte-identical between moves (1: the
      spec's sliding window).
    - ``trigger_tokens``: nothing is masked while the request's estimated
      input is below this (0: always).
    - ``min_chars``: results shorter than this are never masked.
    - ``exclude_tools``: tools whose results are never masked.
    - ``min_free_percent``: a move of the frontier must free at least this
      percentage of what it makes the provider bill again (0: any move).
    - ``max_input_tokens``: if the request is still estimated above this
      after masking, the largest results inside the window are clipped to
      ``clip_head_chars`` + marker + ``clip_tail_chars``, oldest first (0: off).
    - ``preserve_patterns``: (begin, end) marker pairs whose enclosed blocks
      survive inside a masked result.
    """

    enabled: bool = True
    window_turns: int = 8
    keep_errors: bool = True
    keep_last_k_per_tool: int | None = None
    placeholder_template: str = DEFAULT_PLACEHOLDER_TEMPLATE
    batch_turns: int = 1
    trigger_tokens: int = 0
    min_chars: int = 0
    exclude_tools: tuple[str, ...] = ()
    min_free_percent: int = 0
    max_input_tokens: int = 0
    clip_head_chars: int = 2000
    clip_tail_chars: int = 2000
    preserve_patterns: tuple[tuple[str, str], ...] = DEFAULT_PRESERVE_PATTERNS
    matcher: PlaceholderMatcher = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_placeholder_template(self.placeholder_template)
        if self.batch_turns < 1:
            raise PolicyError("batch_turns", f"must be 1 or more, got {self.batch_turns}")
        object.__setattr__(self, "matcher", PlaceholderMatcher(self.placeholder_template))

    @property
    def per_tool_keep(self) -> int:
        return self.keep_last_k_per_tool or 0


# The keys of [observation_masking.schema1], with the type each must have
# (list[str]: an array of strings; list[list[str]]: an array of pairs).
POLICY_KEY_TYPES: dict[str, object] = {
    "enabled": bool,
    "window_turns": int,
    "keep_errors": bool,
    "keep_last_k_per_tool": int,
    "placeholder_template": str,
    "batch_turns": int,
    "trigger_tokens": int,
    "min_chars": int,
    "exclude_tools": list[str],
    "min_free_percent": int,
    "max_input_tokens": int,
    "clip_head_chars": int,
    "clip_tail_chars": int,
    "preserve_patterns": list[list[str]],
}


def _pairs(value: object) -> tuple[tuple[str, str], ...] | None:
    """``value`` as (begin, end) marker pairs, or None if it is not such a list."""
    if not isinstance(value, list):
        return None
    pairs = []
    for pair in value:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(marker, str) and marker for marker in pair)
        ):
            return None
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _strings(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return tuple(value)


def check_policy_value(key: str, value: object) -> None:
    """Raise PolicyError if ``value`` is not acceptable for policy ``key``."""
    expected = POLICY_KEY_TYPES.get(key)
    if expected is None:
        known = ", ".join(POLICY_KEY_TYPES)
        raise PolicyError(key, f"unknown key; the keys are {known}")
    if expected == list[str]:
        if _strings(value) is None:
            raise PolicyError(key, f"must be an array of strings, got {value!r}")
        return
    if expected == list[list[str]]:
        if _pairs(value) is None:
            raise PolicyError(
                key, f"must be an array of [begin, end] pairs of non-empty strings, got {value!r}"
            )
        return
    assert isinstance(expected, type)
    # bool is a subclass of int: `window_turns = true` must not pass as 1.
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise PolicyError(
            key, f"must be {_type_word(expected)}, got {_type_word(type(value))} {value!r}"
        )
    if expected is int and isinstance(value, int):
        lowest = 1 if key == "batch_turns" else 0
        if value < lowest:
            raise PolicyError(key, f"must be {lowest} or more, got {value}")
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
        placeholder_template=pick("placeholder_template", str, defaults.placeholder_template),
        batch_turns=pick("batch_turns", int, defaults.batch_turns),
        trigger_tokens=pick("trigger_tokens", int, defaults.trigger_tokens),
        min_chars=pick("min_chars", int, defaults.min_chars),
        exclude_tools=_strings(values.get("exclude_tools")) or defaults.exclude_tools,
        min_free_percent=pick("min_free_percent", int, defaults.min_free_percent),
        max_input_tokens=pick("max_input_tokens", int, defaults.max_input_tokens),
        clip_head_chars=pick("clip_head_chars", int, defaults.clip_head_chars),
        clip_tail_chars=pick("clip_tail_chars", int, defaults.clip_tail_chars),
        preserve_patterns=(
            _pairs(values["preserve_patterns"])
            if "preserve_patterns" in values
            else defaults.preserve_patterns
        )
        or (),
    )
