"""Head + marker + tail: the one way obsmask shortens a text it keeps.

Used by conversation masking's second stage (clipping results inside the
window when a request is over its budget) and by MCP truncation (long
strings in JSON-RPC responses).

A marker may carry a recall id (``{recall}``: "; recall id=ID", or nothing
when recall is off; ``{recall_id}``: the id alone, or nothing), by which the
model gets the whole text back. With recall off the default marker is, byte
for byte, the plain one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.recall_text import HINT_PATTERN, HINT_WORDS, ID_CHARS, hint
from obsmask_core.shared.templates import FieldTemplate, TemplatePart

TRUNCATION_MARK = "OBSMASK_TRUNCATED"
DEFAULT_MARKER_TEMPLATE = (
    "\n... [" + TRUNCATION_MARK
    + " original_chars={original_chars} head={head} tail={tail}{recall}] ...\n"
)
MARKER_FIELDS = ("original_chars", "head", "tail", "recall", "recall_id")
# How each field looks in a rendered marker, for recognising it again: the
# numbers, the hint (or nothing) and the id (or nothing). A number has at
# most 19 digits (a marker obsmask writes counts less than 10**19): a string
# of more is no marker, read() never hands int() thousands of digits (which
# raises ValueError past 4,300), and searching a long run of digits stays
# linear.
_NUMBER = r"[0-9]{1,19}"
_FIELD_PATTERNS: Mapping[str, str] = MappingProxyType({
    "original_chars": _NUMBER,
    "head": _NUMBER,
    "tail": _NUMBER,
    "recall": HINT_PATTERN,
    "recall_id": ID_CHARS + "{0,128}",
})


def _field_pattern(part: TemplatePart) -> str:
    name = part[1]
    assert name is not None
    return _FIELD_PATTERNS[name]


@dataclass(frozen=True)
class MarkerFields:
    """What a marker found in a text says (None: its template has no such
    field; ``recall_id`` is also None when recall was off)."""

    original_chars: int | None
    head: int | None
    tail: int | None
    recall_id: str | None


class TruncationMarker:
    """The marker of one template: rendered between head and tail, and
    recognised in a string so that a string cut once is never cut again
    (with or without a recall id)."""

    def __init__(self, template: str) -> None:
        self._template = FieldTemplate("marker_template", template, MARKER_FIELDS)
        for _literal, name, spec, conversion in self._template.parts:
            if name is not None and (spec or conversion):
                # The marker is recognised by its fields' shapes: a padded or
                # repr()'d field would not be found again.
                raise SettingError("marker_template",
                                   f"the field {{{name}}} takes no format spec or conversion")
        if not self._template.has_words:
            raise SettingError(
                "marker_template",
                "needs some words besides its fields, so that a cut string can be "
                "recognised and is never cut twice",
            )
        self.template = template
        self._found = re.compile(self._template.pattern(_field_pattern))
        # The longest literal of the template is in every marker: looking for
        # it first (str.find's speed) spares the regular expression, which
        # tries each place of a long text, on every text with no marker.
        self._literal = max((literal for literal, *_ in self._template.parts), key=len)
        # The same, with the first place of each field captured by name.
        named: set[str] = set()

        def capture(part: TemplatePart) -> str:
            name = part[1]
            assert name is not None
            if name in named:
                return "(?:" + _FIELD_PATTERNS[name] + ")"
            named.add(name)
            return f"(?P<{name}>{_FIELD_PATTERNS[name]})"

        self._fields = re.compile(self._template.pattern(capture))

    def render(self, original_chars: int, head: int, tail: int,
               recall_id: str | None = None) -> str:
        """The marker; ``recall_id`` None (recall off) renders {recall} and
        {recall_id} as nothing."""
        return self._template.render(original_chars=original_chars, head=head, tail=tail,
                                     recall=hint(recall_id), recall_id=recall_id or "")

    def found_in(self, text: str) -> bool:
        return self._literal in text and self._found.search(text) is not None

    def read(self, text: str) -> MarkerFields | None:
        """The fields of the first marker in ``text``, or None if it holds none."""
        match = self._fields.search(text) if self._literal in text else None
        if match is None:
            return None
        found = match.groupdict()

        def count(name: str) -> int | None:
            value = found.get(name)
            return int(value) if value else None

        recall_id = found.get("recall_id") or (found.get("recall") or "")[len(HINT_WORDS):]
        return MarkerFields(count("original_chars"), count("head"), count("tail"),
                            recall_id or None)


def check_marker_template(key: str, value: object) -> None:
    """The check of a marker template setting (raises SettingError)."""
    if isinstance(value, str):
        TruncationMarker(value)


DEFAULT_MARKER = TruncationMarker(DEFAULT_MARKER_TEMPLATE)


def truncate_text(
    text: str, head: int, tail: int, marker: TruncationMarker = DEFAULT_MARKER,
    recall_id: str | None = None,
) -> str:
    """``text`` cut to its first ``head`` and last ``tail`` characters with a
    marker between them (carrying ``recall_id``, if any), or ``text`` itself
    if it already holds a marker (a text cut once is never cut again) or
    cutting would not shorten it."""
    if marker.found_in(text):
        return text
    rendered = marker.render(len(text), head, tail, recall_id)
    if head + len(rendered) + tail >= len(text):
        return text
    return text[:head] + rendered + (text[len(text) - tail :] if tail else "")
