"""Recognising a placeholder rendered from the policy's template, so that
masking a request again leaves its masked results as they are."""

from __future__ import annotations

import re

from obsmask_core.shared.templates import FieldTemplate, TemplatePart

PLACEHOLDER_FIELDS = ("tool_call_id", "tool_name", "original_chars", "recall", "recall_id")
# Fields whose value obsmask may have rendered either way (recall on or off),
# or from a text it no longer has: any value is accepted when recognising.
_FREE_FIELDS = ("original_chars", "recall", "recall_id")
# What {tool_name} says when the call named no tool.
UNKNOWN_TOOL_NAME = "inconnu"


def _any_text(part: TemplatePart) -> str:
    return "(.*?)"


class PlaceholderMatcher:
    """Recognises a placeholder rendered from one template, so masking is idempotent.

    A result whose text is already "the placeholder for this call" is left as it
    is: a retried or replayed request is then masked exactly like the first one,
    and the masked bytes stay stable from turn to turn (prompt caches key on them).
    """

    def __init__(self, template: str) -> None:
        parsed = FieldTemplate("placeholder_template", template, PLACEHOLDER_FIELDS)
        self._fields = [(name, spec, conversion)
                        for _literal, name, spec, conversion in parsed.parts if name is not None]
        self._regex = re.compile(parsed.pattern(_any_text), re.DOTALL)

    def matches(self, text: str, tool_call_id: str, tool_name: str | None) -> bool:
        match = self._regex.fullmatch(text)
        if match is None:
            return False
        expected = {
            "tool_call_id": tool_call_id,
            "tool_name": tool_name if tool_name is not None else UNKNOWN_TOOL_NAME,
        }
        for (name, spec, conversion), captured in zip(self._fields, match.groups(), strict=False):
            if name in _FREE_FIELDS:
                continue
            value = expected[name]
            if conversion == "r":
                value = repr(value)
            elif conversion == "a":
                value = ascii(value)
            if format(value, spec or "") != captured:
                return False
        return True
