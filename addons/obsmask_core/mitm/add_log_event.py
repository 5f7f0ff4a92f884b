"""obsmask's log records kept from mitmproxy's deprecated ``add_log`` event
while no addon has that hook.

mitmproxy hands every log record to a handler of its own
(``mitmproxy.log.LegacyLogEvents``, in mitmproxy 11 and 12 alike) that
formats it a second time and, through the event loop's wake-up pipe, asks
every addon for an ``add_log`` hook: most of what a record costs the proxy
(docs/benchmarks.md), and a masked request writes two. No addon of
mitmproxy's has that hook any more (the terminal, mitmweb's and the
console's event logs are logging handlers, which this leaves alone), so
while no loaded addon has it, the event would reach nobody: obsmask's
records then skip that handler. Whether one has it is asked for each
record, when it is written, of the addons as mitmproxy walks them: a script
with the hook gets every line written while it is loaded (one written
while it is being loaded or reloaded may miss it; the event itself runs a
turn of the event loop later). Only the handler of the proxy's own master
is filtered; mitmproxy's own records, and every other handler, are not
touched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from mitmproxy import ctx
from mitmproxy.addonmanager import traverse
from mitmproxy.log import LegacyLogEvents

logger = logging.getLogger(__name__)

# The package whose loggers' records this keeps from the event.
OUR_LOGGERS = __name__.split(".", 1)[0] + "."
HOOK = "add_log"


def someone_listens(addons: Iterable[object]) -> bool:
    """Has an addon of ``addons`` (or of theirs, as mitmproxy walks them)
    the ``add_log`` hook?"""
    return any(getattr(addon, HOOK, None) is not None for addon in traverse(addons))


class OnlyWhenHeard(logging.Filter):
    """Lets an obsmask record through to the ``add_log`` handler only when
    ``heard()`` says an addon has the hook; every other record goes through.
    When ``heard`` fails, the record goes through too, as it would without
    this filter, and the first failure is logged with its traceback (that
    line comes through here too: by then it is told to pass)."""

    def __init__(self, heard: Callable[[], bool]) -> None:
        super().__init__()
        self._heard = heard
        self._failed = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(OUR_LOGGERS):
            return True
        try:
            return self._heard()
        except Exception:  # whatever fails, the record goes on as without the filter
            if not self._failed:
                self._failed = True
                logger.exception("obsmask: cannot tell whether an addon has the add_log hook; "
                                 "obsmask's log records go to it")
            return True


class AddLogEventFilter:
    """The addon: puts the filter on the ``add_log`` handler of the proxy's
    master while it runs (``running``), and takes it off when the addon
    goes (``done``: the proxy stops, or the script is reloaded). Another
    master in the process (tests) keeps its handler as it was: the filter
    asks this master's addons."""

    def __init__(self) -> None:
        self._filtered: list[tuple[logging.Handler, OnlyWhenHeard]] = []

    def running(self) -> None:
        if self._filtered:
            return
        master = ctx.master
        addons = master.addons
        only_when_heard = OnlyWhenHeard(lambda: someone_listens(addons.chain))
        for handler in logging.getLogger().handlers:
            if isinstance(handler, LegacyLogEvents) and handler.master is master:
                handler.addFilter(only_when_heard)
                self._filtered.append((handler, only_when_heard))

    def done(self) -> None:
        for handler, only_when_heard in self._filtered:
            handler.removeFilter(only_when_heard)
        self._filtered.clear()
