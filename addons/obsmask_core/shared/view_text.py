"""Text for people to read: the lines of obsmask's content view, a JSON body
pretty-printed, and the unified diff of two texts, whole or part by part,
its work bounded (``DIFF_WORK``): mitmproxy renders a view on its event
loop, so a slow diff would hold up the proxy. The end of a page, the flow's
comment and the diff (``closing_lines``), is written here once for both.

Both features explain what they did with these
(``conversation/view/masking_page.py``, ``mcp/explain.py``), neither
importing the other; ``mitm/contentview.py`` hands the lines to mitmproxy,
which shows each kind in its own style (mitmproxy 11) or as plain text
(mitmproxy 12).
"""

from __future__ import annotations

import difflib
import json
import textwrap
from collections.abc import Callable, Iterable, Sequence
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


def pretty_value(value: object, default: Callable[[object], object] | None = None) -> str:
    """A parsed JSON value written with an indent of two, non-ASCII
    characters as they are (``default``: as json.dumps takes it)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=default)


def pretty_json(body: str) -> str | None:
    """``body`` parsed as JSON and written again with an indent of two
    (non-ASCII characters as they are), or None when it is not JSON."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    try:
        return pretty_value(value)
    except (ValueError, RecursionError):  # pragma: no cover - what loads parsed, dumps writes
        return None


def pretty_body(body: str) -> str:
    """A body as it is best read: pretty-printed JSON, or the text itself."""
    pretty = pretty_json(body)
    return body if pretty is None else pretty


def body_lines(body: str) -> list[ViewLine]:
    """A body (pretty-printed) as the page's text, line by line."""
    return [text(line) for line in body.splitlines()]


# difflib compares two lists of lines in a time that grows, at worst, with
# the product of their lengths (docs/benchmarks.md has the measured times).
# A page never asks it for more than this much work, in one diff or in all
# of its parts: a diff over it is left out, and the page says so.
DIFF_WORK = 2_000 * 2_000


@dataclass(frozen=True)
class DiffPart:
    """One part of two bodies that line up (an item of a request's list, a
    message of an answer) that differs: a label that says where it is and
    which it is, and its text in each, as it is to be read (pretty-printed)."""

    label: str
    before: str
    after: str


def diff_lines(before: str, after: str, before_name: str, after_name: str,
               context: int = 3, work: int = DIFF_WORK) -> list[ViewLine]:
    """The unified diff of two texts, line by line, with ``context`` lines
    around each change; no line when they are the same; one line saying it
    is left out when comparing them would take more than ``work``."""
    before_lines, after_lines = before.splitlines(), after.splitlines()
    if len(before_lines) * len(after_lines) > work:
        return [text(f"  (the diff is left out: the bodies are too large to compare here, "
                     f"{len(before_lines):,} and {len(after_lines):,} lines)")]
    out: list[ViewLine] = []
    for line in _unified(before_lines, after_lines, before_name, after_name, context):
        if line.startswith(("---", "+++")) and len(out) < 2:
            out.append(heading(line))
        else:
            out.append(_diff_line(line))
    return out


def parts_diff_lines(parts: Iterable[DiffPart], before_name: str, after_name: str,
                     what: str = "parts", context: int = 3,
                     work: int = DIFF_WORK) -> list[ViewLine]:
    """The unified diff of two bodies that line up part by part, made of
    the diffs of the parts that differ, one at a time: each hunk is headed
    by its part's label (and, when the part has several, by its lines in
    the part). No line when no part differs. When the next part would take
    the work spent past ``work``, it and the rest (``what`` they are) are
    left out, in one line that says so."""
    out: list[ViewLine] = []
    spent = 0
    pending = list(parts)
    for done, part in enumerate(pending):
        before_lines, after_lines = part.before.splitlines(), part.after.splitlines()
        spent += len(before_lines) * len(after_lines)
        if spent > work:
            left = len(pending) - done
            out.append(text(f"  (the diffs of the last {left:,} changed {what}, from "
                            f"{part.label} on, are left out: the bodies are too large to "
                            "compare here)"))
            break
        hunks = _hunks(list(_unified(before_lines, after_lines, "", "", context))[2:])
        for hunk, lines in hunks:
            where = f", lines {hunk[3:-3]}" if len(hunks) > 1 else ""
            out.append(ViewLine("hunk", f"@@ {part.label}{where} @@"))
            out.extend(_diff_line(line) for line in lines)
    if out:
        out[:0] = [heading(f"--- {before_name}"), heading(f"+++ {after_name}")]
    return out


def _unified(before: list[str], after: list[str], before_name: str, after_name: str,
             context: int) -> Iterable[str]:
    """difflib's unified diff of two lists of lines: the one place the view
    runs difflib, each caller having bounded its work."""
    return difflib.unified_diff(before, after, before_name, after_name, n=context,
                                lineterm="")


def _hunks(lines: list[str]) -> list[tuple[str, list[str]]]:
    """The lines of a unified diff after its two headers, by hunk: each
    hunk's ``@@`` line and the lines under it."""
    hunks: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("@@"):  # every other line starts with " ", "-" or "+"
            hunks.append((line, []))
        else:
            hunks[-1][1].append(line)
    return hunks


def _diff_line(line: str) -> ViewLine:
    if line.startswith("@@"):
        return ViewLine("hunk", line)
    if line.startswith("-"):
        return ViewLine("removed", line)
    if line.startswith("+"):
        return ViewLine("added", line)
    return ViewLine("context", line)


def comment_lines(comment: Iterable[str]) -> list[ViewLine]:
    """The flow's comment, one line each (mitmweb's comment field runs its
    lines together); nothing when there is none."""
    lines = [text("  " + line) for line in comment if line]
    return [text(""), heading("The flow's comment:"), *lines] if lines else []


@dataclass(frozen=True)
class DiffNames:
    """How a page names what its diff compares: the original ``body``
    ("request": the original request), the one that ``went_out`` ("masked
    request"), the ``parts`` the two line up by ("items"), the ``missing``
    headings above the body that went out when the flow holds no original,
    and the ``kind`` of text a whole body is pretty-printed as."""

    body: str
    went_out: str
    parts: str
    missing: tuple[str, ...]
    kind: str = "JSON"


def closing_lines(comment: Iterable[str], names: DiffNames, original: str | None,
                  went_out: str, parts: Sequence[DiffPart] | None,
                  pretty: Callable[[str], str] = pretty_body) -> list[ViewLine]:
    """The end of a page: the flow's comment, then the diff of the
    ``original`` body and the one that ``went_out``: part by part when the
    two lined up (``parts``; None: they did not), else whole, each
    ``pretty``-printed (when not too large). Without the original, the body
    that went out alone, under the ``missing`` headings."""
    lines = [*comment_lines(comment), text("")]
    if original is None:
        return [*lines, *(heading(words) for words in names.missing),
                *body_lines(pretty(went_out))]
    before_name = f"original {names.body}"
    if parts is not None:
        lines.append(heading(f"The {names.parts} that changed, in the {before_name} (-) and "
                             "as they went out (+), pretty-printed JSON:"))
        diff = parts_diff_lines(parts, before_name, names.went_out, names.parts)
    else:
        lines.append(heading(f"The {before_name} (-) and the one that went out (+), "
                             f"pretty-printed {names.kind}:"))
        diff = diff_lines(pretty(original), pretty(went_out), before_name, names.went_out)
    return lines + (diff or [text("  (the two bodies are the same)")])


def page_text(lines: Iterable[ViewLine]) -> str:
    """The lines as one text, as mitmproxy 12 shows a view."""
    return "\n".join(line.text for line in lines)
