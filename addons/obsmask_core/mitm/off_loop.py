"""Work too big for mitmproxy's event loop, done on a worker thread.

Every flow of every client moves on one event loop: while a big request is
parsed and masked there, every other agent's stream stops. A body from
``OFF_LOOP_BYTES`` on is therefore rewritten on a worker thread while its own
flow waits and the others move; smaller ones are done inline.

The threshold is where the loop's stall is worth a thread's cost, and under
load that cost is not the hand-over alone: while the worker runs, it and the
loop take the GIL from each other at every system call the loop makes, and
the process spends more CPU on every flow. A lower threshold, which sent the
load benchmark's bigger and compressed bodies to the worker, cost more CPU
per request than it spared; inline, a body under the threshold stalls the
loop briefly, for a conversation's first request, where a far bigger one
would stall it for long (the rewrite benchmark off the loop).
docs/benchmarks.md has the figures.

Threads, not processes: the work holds the GIL, but CPython hands it over
every few ms (``sys.getswitchinterval``; more often while a worker runs), the
garbage collector is paused during the work, here as inline
(``without_collector``: its full collections were the longest stalls),
and orjson's longest single call is short even on the biggest bodies, so the
loop is slowed, not stopped; a process would have to copy the body both ways
and the planner's caches would not be shared. One worker: each more would
take the GIL from the loop as often again. More big bodies wait their turn
in its queue.

A compressed body is judged by a guess at its decoded size: JSON compresses
well, and the decoding is part of the work moved.

The worker, the collector's pause and the switch interval act on the whole
process: one ``OffLoop`` serves every addon of a proxy (the conversation
addon makes it; ``obsmask_addons`` hands it to the MCP addon).
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from mitmproxy import http

# From here on, a body is rewritten on a worker thread (see above).
OFF_LOOP_BYTES = 2 * 1024 * 1024
WORKERS = 1
# A compressed body's decoded size, guessed from its size on the wire.
DECODED_PER_ENCODED_BYTE = 8
# While a worker runs, the GIL changes hands more often than the
# interpreter's default: the loop, which needs it for a moment at each step
# of every other flow, then waits that much less each time. Back to the
# interpreter's value when no work is left.
SWITCH_INTERVAL_WHILE_WORKING = 0.0005
# The interpreter's own value, for an OffLoop whose work starts while
# another one's (a reloaded script's) has lowered it.
INTERPRETER_SWITCH_INTERVAL = sys.getswitchinterval()

Result = TypeVar("Result")


class OffLoop:
    """The worker thread that takes big bodies off the event loop, and the
    interpreter settings the work changes while it runs (the collector
    paused, the GIL's switch interval), counted over every work in flight."""

    def __init__(self) -> None:
        # The thread starts with the first work, and ends once this object
        # is gone (a reloaded script makes a new one).
        self._pool = ThreadPoolExecutor(max_workers=WORKERS,
                                        thread_name_prefix="obsmask-off-loop")
        self._paused_lock = threading.Lock()
        self._paused = 0  # works running with the collector paused
        self._collector_was_enabled = True
        self._working = 0  # works handed to the worker and not done
        self._switch_interval = sys.getswitchinterval()

    @staticmethod
    def takes(message: http.Message) -> bool:
        """Is the body of ``message`` (a request or an answer) worth the
        worker thread? Only with an event loop running: a hook called with
        none (a script, a test) has nothing to keep moving and does the work
        inline."""
        size = len(message.raw_content or b"")
        if "content-encoding" in message.headers:
            size *= DECODED_PER_ENCODED_BYTE
        if size < OFF_LOOP_BYTES:
            return False
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def without_collector(self, work: Callable[[], Result]) -> Result:
        """``work()`` with the cyclic garbage collector paused, on any thread,
        however many at once (the collector is switched back on when the
        last one ends, as it was before the first). A rewrite parses a body
        into thousands of containers (far more for a big one) that are freed
        when it returns: while they live, their count sets off collections
        that walk every object of the process holding the GIL (full ones
        were the event loop's longest stalls on big bodies). Parsed JSON has
        no cycles to find, and once it is freed the count is back where it
        was, so the collections its parse would have set off are not owed
        (what the rewrite keeps is counted once the pause ends).

        Inline work pauses it too: the collections a small body set off also
        moved its half-built parse into the old generations, where it counted
        towards the next full collection (each one walks the turns and
        results of the kept indexes). Under the load benchmark's mix, pausing
        it inline made fewer young and full collections, less of the
        collector's time and less CPU per request, for a little more memory
        (docs/benchmarks.md)."""
        with self._paused_lock:
            if self._paused == 0:
                self._collector_was_enabled = gc.isenabled()
                gc.disable()
            self._paused += 1
        try:
            return work()
        finally:
            with self._paused_lock:
                self._paused -= 1
                if self._paused == 0 and self._collector_was_enabled:
                    gc.enable()

    async def run(self, work: Callable[[], Result]) -> Result:
        """``work()`` on the worker thread; its exception, if any, raised
        here. The context (mitmproxy's logging of the current flow) goes
        along."""
        context = contextvars.copy_context()
        if self._working == 0:
            current = sys.getswitchinterval()
            self._switch_interval = (current if current != SWITCH_INTERVAL_WHILE_WORKING
                                     else INTERPRETER_SWITCH_INTERVAL)
            sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL_WHILE_WORKING))
        self._working += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._pool, context.run, lambda: self.without_collector(work))
        finally:
            self._working -= 1
            if self._working == 0:
                sys.setswitchinterval(self._switch_interval)


def freeze_startup_objects() -> None:
    """Leave the objects made at start-up (mitmproxy's and obsmask's
    modules, classes, functions) out of every later collection, once per
    process: objects frozen already say it was done (a reloaded script does
    not freeze what the proxy made since). A full collection walks every
    object, holding the GIL: with them it stalled the event loop far longer
    after a load than without them (``gc.freeze``; they live as long as the
    process anyway, so a cycle among them that is never collected costs
    nothing)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
