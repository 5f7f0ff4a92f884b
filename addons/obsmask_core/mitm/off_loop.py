"""Work too big for mitmproxy's event loop, done on worker threads.

Every flow of every client moves on one event loop: while a 10 MB request is
parsed and masked there (~100 ms), every other agent's stream stops. A body
from ``OFF_LOOP_BYTES`` on is therefore rewritten on a worker thread while
its own flow waits and the others move; smaller ones are done inline, where
a thread's hand-over would cost more than it spares (the threshold comes
from ``scripts/bench_rewrite.py --off-loop``).

Threads, not processes: the work holds the GIL, but CPython hands the GIL
over every few milliseconds (``sys.getswitchinterval``), and orjson's
longest single call on a 10 MB body is ~20 ms, so the loop never waits long;
a process would have to copy the body both ways and the planner's caches
would not be shared. The pool is bounded: more big bodies wait their turn in
its queue, never more than ``WORKERS`` at a time.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

# From here on, a body is rewritten on a worker thread (see above).
OFF_LOOP_BYTES = 256 * 1024
# Two: a medium body is not stuck behind one huge one; more would only
# share the same GIL.
WORKERS = 2

_pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="obsmask-off-loop")

Result = TypeVar("Result")


def off_loop(size: int) -> bool:
    """Is a body of ``size`` bytes worth a worker thread? Only with an event
    loop running: a hook called with none (a script, a test) has nothing
    to keep moving and does the work inline."""
    if size < OFF_LOOP_BYTES:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def run_off_loop(work: Callable[[], Result]) -> Result:
    """``work()`` on a worker thread; its exception, if any, raised here.
    The context (mitmproxy's logging of the current flow) goes along."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_pool, context.run, work)
