"""Head + marker + tail: the one way obsmask shortens a text it keeps.

Used by the second stage of conversation masking (clipping results inside
the window when a request is over its budget), and meant for the MCP
truncation of long JSON-RPC strings.
"""

from __future__ import annotations

TRUNCATION_MARK = "OBSMASK_TRUNCATED"
DEFAULT_MARKER_TEMPLATE = (
    "\n... [" + TRUNCATION_MARK + " original_chars={original_chars} head={head} tail={tail}] ...\n"
)


def is_truncated(text: str) -> bool:
    """A text obsmask already cut is never cut again (idempotence)."""
    return TRUNCATION_MARK in text


def truncate_text(
    text: str, head: int, tail: int, marker_template: str = DEFAULT_MARKER_TEMPLATE
) -> str:
    """``text`` cut to its first ``head`` and last ``tail`` characters with a
    marker between them, or ``text`` itself if cutting would not shorten it
    or it was already cut."""
    if is_truncated(text):
        return text
    marker = marker_template.format(original_chars=len(text), head=head, tail=tail)
    if len(text) <= head + tail + len(marker):
        return text
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")
