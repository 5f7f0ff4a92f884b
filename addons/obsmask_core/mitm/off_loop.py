"""Work too big for mitmproxy's event loop, done on worker threads.

Every flow of every client moves on one event loop: while a 10 MB request is
parsed and masked there (~180 ms for a conversation's first), every other
agent's stream stops. A body from ``OFF_LOOP_BYTES`` on is therefore
rewritten on a worker thread while its own flow waits and the others move;
smaller ones are done inline.

The threshold is where the loop's stall is worth a thread's cost, and under
load that cost is not the hand-over alone: while the worker runs, it and the
loop take the GIL from each other at every system call the loop makes, and
the process spends more CPU on every flow. With the threshold at 256 KiB
(the 1.5 MB and the compressed bodies of the load benchmark's mix on the
worker), obsmask took 5.5-5.9 ms of CPU per request in
``scripts/bench_load.py``; with 2 MiB, 4.06-4.08 ms (and two mitmdumps
side by side in one run, one with each threshold: 5.3 and 4.1 ms).
Inline, a body under 2 MiB stalls the loop about 1 ms a MB, and ~30 ms at
most, for a conversation's first request; a 10 MB one would stall it
180 ms (``scripts/bench_rewrite.py --off-loop``).

Threads, not processes: the work holds the GIL, but CPython hands it over
every few ms (``sys.getswitchinterval``; 0.5 ms while a worker runs), the
garbage collector is paused during the work, here as inline
(``without_collector``: its full collections were the longest stalls),
and orjson's longest single call is ~30 ms on a 10 MB body (~40 ms at
16 MB), so the loop is slowed, not stopped; a process would have to copy
the body both ways and the planner's caches would not be shared. One
worker: each more would take the GIL from the loop as often again. More
big bodies wait their turn in its queue.

A compressed body is judged by a guess at its decoded size: JSON compresses
8x or more, and the decoding is part of the work moved.
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

_pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="obsmask-off-loop")

Result = TypeVar("Result")


def off_loop(message: http.Message) -> bool:
    """Is the body of ``message`` (a request or an answer) worth a worker
    thread? Only with an event loop running: a hook called with none (a
    script, a test) has nothing to keep moving and does the work inline."""
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


# While a worker runs, the GIL changes hands every 0.5 ms instead of 5 ms:
# the loop, which needs it for a moment at each step of every other flow,
# then waits a tenth as long each time. Back to the interpreter's value
# when no work is left.
SWITCH_INTERVAL_WHILE_WORKING = 0.0005
_working = 0
_switch_interval = sys.getswitchinterval()


_paused = 0
_paused_lock = threading.Lock()
_collector_was_enabled = True


def without_collector(work: Callable[[], Result]) -> Result:
    """``work()`` with the cyclic garbage collector paused, on any thread,
    however many at once (the collector is switched back on when the last
    one ends, as it was before the first). A rewrite parses a body into
    thousands of containers (hundreds of thousands for a big one) that are
    freed when it returns: while they live, their count sets off
    collections that walk every object of the process holding the GIL
    (full ones stalled the event loop up to ~90 ms on a 10 MB body). Parsed
    JSON has no cycles to find, and once it is freed the count is back
    where it was, so the collections its parse would have set off are not
    owed (what the rewrite keeps is counted once the pause ends).

    Inline work pauses it too: the collections a small body set off also
    moved its half-built parse into the old generations, where it counted
    towards the next full collection (~50 ms each, walking the ~100,000
    turns and results of the kept indexes). Under the load benchmark's mix
    (two mitmdumps side by side, three runs of 12,000 requests), pausing it
    inline took the young collections from 4,013 to 1,897, the full ones
    from 33 to 15, the collector's time from 2.9 to 2.1 s, and obsmask's
    CPU per request down 0.6-3.5%, for 2-11 MB more memory."""
    global _paused, _collector_was_enabled
    with _paused_lock:
        if _paused == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        return work()
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _collector_was_enabled:
                gc.enable()


_frozen = False


def freeze_startup_objects() -> None:
    """Leave the objects made at start-up (mitmproxy's and obsmask's
    modules, classes, functions: ~90,000) out of every later collection,
    once per process. A full collection walks every object, holding the
    GIL: with them it stalled the event loop 50-70 ms after a load, without
    them at most 13 ms (``gc.freeze``; they live as long as the process
    anyway, so a cycle among them that is never collected costs nothing)."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()


async def run_off_loop(work: Callable[[], Result]) -> Result:
    """``work()`` on a worker thread; its exception, if any, raised here.
    The context (mitmproxy's logging of the current flow) goes along."""
    global _working, _switch_interval
    context = contextvars.copy_context()
    if _working == 0:
        _switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(_switch_interval, SWITCH_INTERVAL_WHILE_WORKING))
    _working += 1
    try:
        return await asyncio.get_running_loop().run_in_executor(_pool, context.run,
                                                                lambda: without_collector(work))
    finally:
        _working -= 1
        if _working == 0:
            sys.setswitchinterval(_switch_interval)
