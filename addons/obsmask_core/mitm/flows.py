"""What obsmask leaves on a flow for the user: a mark, comment lines, the
name of the flow in the log, and its log lines, written once the flow has
gone on."""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVarTuple

from mitmproxy import http

from obsmask_core.shared.request_record import CONVERSATION_RECORD, MCP_RECORD

logger = logging.getLogger(__name__)

# mitmweb shows marked flows with this emoji.
MARK = ":scissors:"
# flow.metadata keys (mitmproxy saves metadata with the flow).
CONVERSATION_METADATA = CONVERSATION_RECORD
MCP_METADATA = MCP_RECORD

Ts = TypeVarTuple("Ts")


def where(flow: http.HTTPFlow) -> str:
    """The flow as the log names it. The path without its query: some
    clients put keys in the query string."""
    return f"{flow.request.method} {flow.request.path.split('?', 1)[0]}"


def after_this_turn(flow: http.HTTPFlow, work: Callable[[*Ts], object], *args: *Ts) -> None:
    """Do ``work(*args)``, called from one of ``flow``'s hooks (on the event
    loop's thread), once mitmproxy has sent on what the hook let through,
    so that the flow does not wait for it.

    The work waits two turns of the loop: when tasks start eagerly (Python
    3.12, where mitmproxy 12 turns that on) mitmproxy takes the flow up
    again on the turn after the hook returned, and writes then. When the
    hook's flow still has to open its server connection, or a later addon's
    hook waits, the work may still come before the write, as it did when
    it was done in the hook. A flow nobody waits for (read from a file:
    ``mitmdump -nr``), or a call off the loop, has the work done at once: a
    replay would otherwise keep every flow of the file until its end, and
    print their lines after all of them. The arguments are passed along rather than closed over:
    fewer objects per flow for the collector to count."""
    if flow.live:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            loop.call_soon(loop.call_soon, work, *args)
            return
    work(*args)


def log_once_sent(flow: http.HTTPFlow, log: logging.Logger, message: str, *args: object) -> None:
    """An info line about ``flow``, written once mitmproxy has sent on what
    the hook let through (``after_this_turn``). Warnings are logged at once.

    A log record is not cheap in mitmproxy: the console's handler formats
    and prints it (and, while an addon has the deprecated ``add_log`` hook,
    a second handler formats it and asks every addon for that hook:
    ``add_log_event.py``). Written inside a hook, that held the request a
    good part of what obsmask adds to it (docs/benchmarks.md).
    The record names the hook's place, read now; its time is when it is
    written."""
    if not log.isEnabledFor(logging.INFO):
        return
    frame = inspect.currentframe()
    caller = frame.f_back if frame is not None else None
    path, line, function = ((caller.f_code.co_filename, caller.f_lineno, caller.f_code.co_name)
                            if caller is not None else ("(unknown file)", 0, "(unknown function)"))
    after_this_turn(flow, _write, log, path, line, function, message, args)


def _write(log: logging.Logger, path: str, line: int, function: str, message: str,
           args: tuple[object, ...]) -> None:
    log.handle(log.makeRecord(log.name, logging.INFO, path, line, message, args, None, function))


def add_comment(flow: http.HTTPFlow, line: str, *, replacing: str | None = None) -> None:
    """Add ``line`` to the flow's comment (first dropping the lines that
    start with ``replacing``: a figure updated as a stream goes on)."""
    comment = flow.comment or ""
    if replacing is not None:
        comment = "\n".join(c for c in comment.split("\n") if c and not c.startswith(replacing))
    flow.comment = f"{comment}\n{line}" if comment else line


@contextmanager
def guarded(flow: http.HTTPFlow, outcome: str) -> Iterator[None]:
    """Never let a bug of ours reach the user's traffic: an exception inside
    is logged with its traceback, saying what became of the flow
    (``outcome``, e.g. "forwarded unchanged"), and goes no further."""
    try:
        yield
    except Exception:
        logger.exception("obsmask: internal error, %s %s", where(flow), outcome)


def original_request(flow: http.HTTPFlow) -> http.Request | None:
    """The request as the client sent it, when obsmask changed it (its
    backup); None when the flow has no backup or one that cannot be read."""
    message = _from_state(http.Request, _backed_up_part(flow, "request"))
    return message if isinstance(message, http.Request) else None


def original_response(flow: http.HTTPFlow) -> http.Response | None:
    """The answer as the server sent it, when obsmask cut it (its backup)."""
    message = _from_state(http.Response, _backed_up_part(flow, "response"))
    return message if isinstance(message, http.Response) else None


def _backed_up_part(flow: http.HTTPFlow, part: str) -> dict[str, object] | None:
    """mitmproxy keeps the backup on a private attribute, the same in 11 and
    12: the flow state ``flow.backup()`` saved (None if it never ran), also
    in flow files."""
    state = getattr(flow, "_backup", None)
    saved = state.get(part) if isinstance(state, dict) else None
    return saved if isinstance(saved, dict) else None


def _from_state(cls: type[http.Message], saved: dict[str, object] | None) -> object:
    if saved is None:
        return None
    try:
        # from_state may take what it is given apart: a copy, so the flow
        # keeps its backup.
        return cls.from_state(copy.deepcopy(saved))
    except (AssertionError, KeyError, TypeError, ValueError):
        return None  # a backup of another flow format: no original to read
