"""Text for people to read: the lines of obsmask's content view, a JSON body
pretty-printed, and the unified diff of two texts.

Both features explain what they did with these (``conversation/explain.py``,
``mcp/explain.py``); ``mitm/contentview.py`` hands the lines to mitmproxy,
which shows each kind in its own style (mitmproxy 11) or as plain text
(mitmproxy 12).
"""

from __future__ import annotations

import difflib
import json
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

# title: the page's first line; heading: a section's; text: the rest of
# the explanation; removed, added, context and hunk: the lines of a diff.
LineKind = Literal["title", "heading", "text", "removed", "added", "context", "hunk"]
# Lines of a list of ids are cut here (mitmweb scrolls long lines sideways).
ID_LINE_CHARS = 100


@dataclass(frozen=True)
class ViewLine:
    kind: LineKind
    text: str


def title(text: str) -> ViewLine:
    return ViewLine("title", text)


def heading(text: str) -> ViewLine:
    return ViewLine("heading", text)


def text(line: str) -> ViewLine:
    return ViewLine("text", line)


def paragraph(words: str, indent: str = "", width: int = ID_LINE_CHARS) -> list[ViewLine]:
    """A sentence on lines of at most ``width`` characters."""
    return [text(line) for line in textwrap.wrap(words, width, initial_indent=indent,
                                                  subsequent_indent=indent)]


def number(value: int | None) -> str:
    """A count as the flow's comment writes it: 12,345 (or n/a)."""
    return f"{value:,}" if value is not None else "n/a"


def sizes(before: int | None, after: int | None, unit: str) -> str:
    return f"{number(before)} -> {number(after)} {unit}"


def table(rows: Iterable[tuple[str, ...]], indent: str = "  ") -> list[ViewLine]:
    """Rows as lines, each column as wide as its widest cell (the last one
    is not padded)."""
    rows = list(rows)
    if not rows:
        return []
    widths = [max(len(row[column]) for row in rows if column < len(row))
              for column in range(max(len(row) for row in rows))]
    return [
        text(indent + "  ".join(cell.ljust(widths[column]) if column < len(row) - 1 else cell
                                for column, cell in enumerate(row)).rstrip())
        for row in rows
    ]


def wrapped(words: Iterable[str], indent: str = "    ",
            width: int = ID_LINE_CHARS) -> list[ViewLine]:
    """Words (ids) joined by commas, on lines of about ``width`` characters."""
    lines: list[ViewLine] = []
    current = ""
    for word in words:
        candidate = f"{current}, {word}" if current else word
        if current and len(indent) + len(candidate) > width:
            lines.append(text(indent + current + ","))
            candidate = word
        current = candidate
    if current:
        lines.append(text(indent + current))
    return lines


def pretty_json(body: str) -> str | None:
    """``body`` parsed as JSON and written again with an indent of two
    (non-ASCII characters as they are), or None when it is not JSON."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):  # pragma: no cover - what loads parsed, dumps writes
        return None


def pretty_body(body: str) -> str:
    """A body as it is best read: pretty-printed JSON, or the text itself."""
    pretty = pretty_json(body)
    return body if pretty is None else pretty


def diff_lines(before: str, after: str, before_name: str, after_name: str,
               context: int = 3) -> list[ViewLine]:
    """The unified diff of two texts, line by line, with ``context`` lines
    around each change; no line when they are the same."""
    out: list[ViewLine] = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), before_name,
                                     after_name, n=context, lineterm=""):
        if line.startswith(("---", "+++")) and len(out) < 2:
            out.append(heading(line))
        elif line.startswith("@@"):
            out.append(ViewLine("hunk", line))
        elif line.startswith("-"):
            out.append(ViewLine("removed", line))
        elif line.startswith("+"):
            out.append(ViewLine("added", line))
        else:
            out.append(ViewLine("context", line))
    return out


def comment_lines(comment: Iterable[str]) -> list[ViewLine]:
    """The flow's comment, one line each (mitmweb's comment field runs its
    lines together); nothing when there is none."""
    lines = [text("  " + line) for line in comment if line]
    return [text(""), heading("The flow's comment:"), *lines] if lines else []


def page_text(lines: Iterable[ViewLine]) -> str:
    """The lines as one text, as mitmproxy 12 shows a view."""
    return "\n".join(line.text for line in lines)
