"""Head + marker + tail: the one way obsmask shortens a text it keeps.

Used by the second stage of conversation masking (clipping results inside
the window when a request is over its budget) and by MCP truncation (long
strings in JSON-RPC responses).
"""

from __future__ import annotations

import re
import string

from obsmask_core.policy import PolicyError

TRUNCATION_MARK = "OBSMASK_TRUNCATED"
DEFAULT_MARKER_TEMPLATE = (
    "\n... [" + TRUNCATION_MARK + " original_chars={original_chars} head={head} tail={tail}] ...\n"
)
MARKER_FIELDS = ("original_chars", "head", "tail")


class TruncationMarker:
    """The marker of one template: rendered between head and tail, and
    recognised in a string so that a string cut once is never cut again."""

    def __init__(self, template: str) -> None:
        try:
            parts = list(string.Formatter().parse(template))
        except ValueError as e:
            raise PolicyError("marker_template", f"not a valid template ({e})") from None
        pattern = []
        for literal, name, spec, conversion in parts:
            pattern.append(re.escape(literal))
            if name is None:
                continue
            if name not in MARKER_FIELDS or spec or conversion:
                known = ", ".join("{" + f + "}" for f in MARKER_FIELDS)
                raise PolicyError(
                    "marker_template", f"unknown field {{{name}}}; the fields are {known}"
                )
            pattern.append(r"[0-9]+")
        if not any(ch.isalpha() for literal, *_ in parts for ch in literal):
            raise PolicyError(
                "marker_template",
                "needs some words besides its fields, so that a cut string can be "
                "recognised and is never cut twice",
            )
        self.template = template
        self._found = re.compile("".join(pattern))

    def render(self, original_chars: int, head: int, tail: int) -> str:
        return self.template.format(original_chars=original_chars, head=head, tail=tail)

    def found_in(self, text: str) -> bool:
        return self._found.search(text) is not None


DEFAULT_MARKER = TruncationMarker(DEFAULT_MARKER_TEMPLATE)


def truncate_text(
    text: str, head: int, tail: int, marker: TruncationMarker = DEFAULT_MARKER
) -> str:
    """``text`` cut to its first ``head`` and last ``tail`` characters with a
    marker between them, or ``text`` itself if it already holds a marker (a
    text cut once is never cut again) or cutting would not shorten it."""
    if marker.found_in(text):
        return text
    rendered = marker.render(len(text), head, tail)
    if head + len(rendered) + tail >= len(text):
        return text
    return text[:head] + rendered + (text[len(text) - tail :] if tail else "")
