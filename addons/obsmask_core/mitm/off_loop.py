"""Work too big for mitmproxy's event loop, done on worker threads.

Every flow of every client moves on one event loop: while a 10 MB request is
parsed and masked there (~100 ms), every other agent's stream stops. A body
from ``OFF_LOOP_BYTES`` on is therefore rewritten on a worker thread while
its own flow waits and the others move; smaller ones are done inline, where
a thread's hand-over would cost more than it spares (the threshold comes
from ``scripts/bench_rewrite.py --off-loop``).

Threads, not processes: the work holds the GIL, but CPython hands it over
every 5 ms (``sys.getswitchinterval``), and orjson's longest single call is
~30 ms on a 10 MB body (~40 ms at 16 MB), so the loop is slowed, not
stopped; a process would have to copy the body both ways and the planner's
caches would not be shared. One worker: each more would take the GIL from
the loop as often again. More big bodies wait their turn in its queue.

A compressed body is judged by a guess at its decoded size: JSON compresses
8x or more, and the decoding is part of the work moved.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

# From here on, a body is rewritten on a worker thread (see above).
OFF_LOOP_BYTES = 256 * 1024
WORKERS = 1
# A compressed body's decoded size, guessed from its size on the wire.
DECODED_PER_ENCODED_BYTE = 8

_pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="obsmask-off-loop")

Result = TypeVar("Result")


def off_loop(size: int, *, compressed: bool = False) -> bool:
    """Is a body of ``size`` bytes (on the wire) worth a worker thread? Only
    with an event loop running: a hook called with none (a script, a test)
    has nothing to keep moving and does the work inline."""
    if size * (DECODED_PER_ENCODED_BYTE if compressed else 1) < OFF_LOOP_BYTES:
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
