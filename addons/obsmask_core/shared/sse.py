"""Server-sent events cut into lines as the bytes arrive, for every reader of
an event stream in the package.

The framing is the one of the SSE specification (WHATWG HTML, "Server-sent
events"): a line ends in ``\\r\\n``, ``\\n`` or ``\\r``; one byte order mark
may open the stream and is not part of the first line; a line that starts
with ``:`` is a comment; a field's name is what comes before the first colon,
and one space after that colon is not part of its value.

:class:`SseLineSplitter` takes the bytes in chunks cut anywhere (between a
``\\r`` and its ``\\n``, inside a UTF-8 character) and hands out whole lines,
each with its own line end, so that a user who writes them out again writes
the bytes that came. What it holds between two chunks is the line not yet
ended, and its user decides how much of that it may hold
(:meth:`SseLineSplitter.skip_line`).
"""

from __future__ import annotations

BOM = b"\xef\xbb\xbf"
_CR = 0x0D
_LF = 0x0A
_COLON = 0x3A


def is_data_line(content: bytes) -> bool:
    """Whether a line (without its line end) is a ``data`` field: ``data``
    alone or ``data:...`` (the name is everything before the first colon)."""
    return content.startswith(b"data") and (len(content) == 4 or content[4] == _COLON)


def data_value(content: bytes) -> bytes | None:
    """The value of a ``data`` line (without its line end), one space after
    the colon left out; None for any other line."""
    if not is_data_line(content):
        return None
    # One slice: a data line may be megabytes long.
    return content[6:] if content[5:6] == b" " else content[5:]


class SseLineSplitter:
    """Cuts a stream of bytes into SSE lines, incrementally.

    Feed the chunks in order with :meth:`feed`, which returns the lines they
    complete, each ending in its own ``\\n``, ``\\r\\n`` or ``\\r``; at the end
    of the stream :meth:`finish` returns the line it completes, if any, and
    :meth:`take_rest` the last line if it never ended. An opening byte order
    mark is not part of any line: :meth:`take_bom` gives it once.

    A ``\\r`` that is the last byte fed so far may be followed by the ``\\n``
    of a ``\\r\\n``. By default its line is held until the next byte tells,
    so that every byte is handed out once and where it came. With
    ``eager_cr=True`` the line goes out at once, and a ``\\n`` that opens the
    next chunk is taken as the rest of its line end and dropped: for a user
    who reads the lines and writes nothing out.

    With ``comments=False`` comment lines are neither handed out nor held
    while they arrive.

    Memory: the splitter holds the line not yet ended (:attr:`held`). A user
    that must bound its memory looks at ``held`` after each feed and calls
    :meth:`skip_line` when it is too much: the held bytes are dropped, and so
    is the rest of that line as it comes.
    """

    def __init__(self, *, eager_cr: bool = False, comments: bool = True) -> None:
        self._eager_cr = eager_cr
        self._comments = comments
        self._started = False  # past the place where a byte order mark may stand
        self._bom = b""  # the byte order mark seen, until taken
        # The line not yet ended (before the start: the bytes that may be a
        # byte order mark). Without eager_cr, a last "\r" waits here.
        self._rest = bytearray()
        self._skipping = False  # the current line is dropped up to its end
        self._after_cr = False  # eager_cr: the last chunk ended a line with "\r"

    @property
    def held(self) -> int:
        """How many bytes of a line not yet ended are held."""
        return len(self._rest)

    def take_bom(self) -> bytes:
        """The byte order mark that opened the stream, the first time it is
        asked for once it is known; ``b""`` otherwise."""
        bom, self._bom = self._bom, b""
        return bom

    def feed(self, data: bytes) -> list[bytes]:
        """The lines that ``data``, the next bytes of the stream, completes."""
        if not self._started:
            data = self._opening(data)
        if data and self._after_cr:
            self._after_cr = False
            if data[0] == _LF:
                data = data[1:]
        if not data:
            return []
        lines = data.splitlines(keepends=True)
        tail = b""  # the start of a line that does not end in data
        last = lines[-1][-1]
        if last != _LF and (last != _CR or not self._eager_cr):
            tail = lines.pop()
        elif last == _CR:
            self._after_cr = True
        rest = self._rest
        if rest and (lines or rest[-1] == _CR):  # the held line ends here
            if rest[-1] != _CR or data[0] == _LF:
                rest += lines[0]
                lines[0] = bytes(rest)
            else:  # a held "\r" ended its line
                lines.insert(0, bytes(rest))
            rest.clear()
        if self._skipping:
            if lines:
                del lines[0]
                self._skipping = False
            else:  # the skipped line goes on: hold at most its last "\r"
                tail = tail[-1:] if tail[-1:] == b"\r" else b""
        rest += tail
        if not self._comments:
            if rest and rest[0] == _COLON:
                self.skip_line()
            return [line for line in lines if line[0] != _COLON]
        return lines

    def finish(self) -> list[bytes]:
        """The end of the stream: the line a held ``\\r`` ends, if any."""
        self._started = True
        if not self._rest or self._rest[-1] != _CR:
            return []
        line = bytes(self._rest)
        self._rest.clear()
        if self._skipping:
            self._skipping = False
            return []
        return [line]

    def take_rest(self) -> bytes:
        """The line not yet ended, as it came, given up by the splitter (at
        the end of the stream: the last line, which never ended)."""
        rest = bytes(self._rest)
        self._rest.clear()
        return rest

    def skip_line(self) -> None:
        """Drop the line not yet ended: the bytes held now, and the rest of
        that line as it comes (it is never handed out)."""
        if self._rest:
            self._started = True
            self._skipping = True
            self._forget_rest()

    def _forget_rest(self) -> None:
        """Keep of a skipped line only a last ``\\r`` (a ``\\n`` may complete it)."""
        ends_in_cr = self._rest[-1:] == b"\r"
        self._rest.clear()
        if ends_in_cr:
            self._rest.append(_CR)

    def _opening(self, data: bytes) -> bytes:
        """``data`` after the byte order mark, if the stream opens with one;
        ``b""`` while too few bytes have come to tell."""
        if self._rest:
            data = bytes(self._rest) + data
            self._rest.clear()
        if len(data) < len(BOM) and BOM.startswith(data):
            self._rest += data
            return b""
        self._started = True
        if data.startswith(BOM):
            self._bom = BOM
            return data[len(BOM) :]
        return data
