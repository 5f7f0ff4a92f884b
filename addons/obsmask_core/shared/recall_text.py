"""The words of recall: the ids, the hint a placeholder or marker carries,
the stub the ``recall`` tool answers with, and the part of a text a recall
asks for.

Both features and the recall server speak them: conversation masking puts
``recall id=ID`` in a placeholder (ID is the result's tool call id) and
replaces a stub in the next request with the original text; MCP truncation
puts ``recall id=cut-...`` in a marker (a hash of the whole string, kept in
the store); the recall server reads the id back.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from dataclasses import dataclass

# What an id may hold: the tool call ids of the three wire formats
# ("call_...", "toolu_...", "fc_...") and the store's "cut-<hex>". No space,
# bracket or quote, so that an id survives inside JSON and inside the hint.
ID_CHARS = r"[A-Za-z0-9_.:\-]"
_ID = re.compile(ID_CHARS + "{1,128}")
# A cut MCP string's id: this prefix and 16 hex digits of its hash.
STORE_ID_PREFIX = "cut-"
HINT_WORDS = "; recall id="


def is_recall_id(text: str) -> bool:
    return _ID.fullmatch(text) is not None


def is_store_id(recall_id: str) -> bool:
    return recall_id.startswith(STORE_ID_PREFIX)


def store_id(text: str) -> str:
    """The id of a cut MCP string: a hash of the whole string, so the same
    string always gets the same id (the marker's bytes stay the same from
    one answer to the next) and is kept once."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8)
    return STORE_ID_PREFIX + digest.hexdigest()


def hint(recall_id: str | None) -> str:
    """What ``{recall}`` renders to in a placeholder or marker: a short
    pointer to the recall tool, or nothing when recall is off (None)."""
    return "" if recall_id is None else HINT_WORDS + recall_id


# The hint as it may appear in a rendered template (for recognising a
# placeholder or marker that obsmask wrote before).
HINT_PATTERN = "(?:" + re.escape(HINT_WORDS) + ID_CHARS + "{1,128})?"


@dataclass(frozen=True)
class RecallQuery:
    """What a ``recall`` call asks for: the text with id ``recall_id``,
    whole, or its lines ``first_line`` to ``last_line`` (1-based, both
    included), or its lines that contain ``pattern``."""

    recall_id: str
    first_line: int | None = None
    last_line: int | None = None
    pattern: str | None = None

    def stub(self) -> str:
        """The recall tool's answer for a conversation result: the stub that
        conversation masking replaces, in the next request, with the text
        asked for. Its parameters are in it, so the request alone says what
        goes there (no state); the pattern is percent-encoded, so the stub
        holds no character that JSON escapes."""
        words = [f"id={self.recall_id}"]
        if self.first_line is not None or self.last_line is not None:
            words.append(f"lines={self.first_line or 1}-{self.last_line or ''}")
        if self.pattern is not None:
            words.append("pattern=" + urllib.parse.quote(self.pattern, safe=""))
        return f"[{STUB_WORD} {' '.join(words)}] {STUB_NOTE}"

    def select(self, text: str) -> str:
        """The part of ``text`` asked for: the whole text byte for byte, a
        range of its lines as they are, or the lines holding the pattern,
        each after its number ("12: ..."). A selection that is empty says so."""
        if self.first_line is None and self.last_line is None and self.pattern is None:
            # An empty text would make an empty text block, which some
            # providers refuse.
            return text or f"[obsmask recall id={self.recall_id}: the result is empty]"
        lines = text_lines(text)
        first = max(1, self.first_line or 1)
        last = min(len(lines), self.last_line or len(lines))
        numbered = list(enumerate(lines, start=1))[first - 1 : last]
        if self.pattern is None:
            if not numbered and not lines:
                return f"[obsmask recall id={self.recall_id}: the result is empty]"
            if not numbered:
                return (f"[obsmask recall id={self.recall_id}: the text has {len(lines)} "
                        f"lines; lines {first}-{self.last_line} hold nothing]")
            return "".join(line for _, line in numbered)
        found = [f"{number}: {line.rstrip(chr(10)).rstrip(chr(13))}\n"
                 for number, line in numbered if self.pattern in line]
        if not found:
            return (f"[obsmask recall id={self.recall_id}: no line of the text "
                    f"({len(lines)} lines) contains {self.pattern!r}]")
        return "".join(found)


def text_lines(text: str) -> list[str]:
    """The lines of ``text``, each with its line end, split at "\n" only
    (as ``sed -n`` and ``grep -n`` count them: a form feed or a "\r"
    alone does not start a line)."""
    return _LINE.findall(text)


_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")
# The longest pattern a stub carries, percent-encoded (a non-ASCII character
# takes up to 12 characters there); the recall tool refuses longer ones.
MAX_ENCODED_PATTERN = 2000


def pattern_fits(pattern: str) -> bool:
    return 0 < len(urllib.parse.quote(pattern, safe="")) <= MAX_ENCODED_PATTERN


STUB_WORD = "obsmask-recall"
# Said to a model that sees the stub itself: it only does when its
# requests do not pass through obsmask (or recall is off there).
STUB_NOTE = "(obsmask puts the text here in the model's next request)"
_STUB = re.compile(
    r"\[" + STUB_WORD + r" id=(" + ID_CHARS + r"{1,128})"
    r"(?: lines=([0-9]{1,9})-([0-9]{0,9}))?"
    r"(?: pattern=([A-Za-z0-9%_.~\-]{1," + str(MAX_ENCODED_PATTERN) + r"}))?\]"
)
# A tool result is a recall stub only when it is little more than the stub
# (an agent may wrap the MCP answer in JSON or add a line of its own).
STUB_RESULT_MAX_CHARS = 4096


def is_recall_tool(name: str | None) -> bool:
    """Is this the recall tool, as an agent names it ("recall",
    "mcp__obsmask__recall", "obsmask__recall"...)? Only its results are
    read as stubs: a grep that quotes a stub is left alone."""
    return name is not None and name.lower().endswith(TOOL_NAME)


TOOL_NAME = "recall"


def find_stub(text: str) -> RecallQuery | None:
    """The query of the one stub that ``text`` (a tool result) is, or None."""
    if len(text) > STUB_RESULT_MAX_CHARS or STUB_WORD not in text:
        return None
    found = _STUB.findall(text)
    if len(found) != 1:
        return None
    recall_id, first, last, pattern = found[0]
    return RecallQuery(
        recall_id,
        int(first) if first else None,
        int(last) if last else None,
        urllib.parse.unquote(pattern) if pattern else None,
    )


def not_in_request(recall_id: str) -> str:
    """What replaces a stub whose result the request no longer holds."""
    return (f"[obsmask recall id={recall_id}: that tool result is no longer in this "
            "conversation (the client dropped or compacted it), so it cannot be "
            "recalled; run the tool again if you need it]")
