"""obsmask's addons, each hook timed: the script ``scripts/bench_hooks.py``
loads into its mitmdump (``-s``) instead of ``addons/obsmask.py``.

Every hook of every obsmask addon is wrapped by a timer, and so are the
pieces of a flow's cost that are mitmproxy's and obsmask only calls:
``Flow.backup`` (the copy of what the client sent) and the handling of
obsmask's log records (mitmproxy formats each and prints it, and queues
its ``add_log`` event while an addon has that hook), in the hooks and
after them (``flows.log_once_sent`` writes a flow's lines two turns of the
loop after its hook). Each time is
filed under the flow's kind, the ``k`` query parameter the benchmark's
client sends (``first``, ``next``). At ``done`` every list of times is
written as JSON to the file named by the environment variable
``OBSMASK_BENCH_HOOKS_OUT``. An async hook (the
gateway's, recall's), or work handed to the worker thread, is timed with
what mitmproxy awaits of it.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

from mitmproxy import flow as mitmproxy_flow
from mitmproxy import http

# mitmdump loads this file alone: obsmask and benchlib on the path first.
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "addons"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchlib.hooks import (
    BACKUP,
    LATER_LOG_RECORD_COUNT,
    LATER_LOG_RECORDS,
    LOG_RECORD_COUNT,
    LOG_RECORDS,
    MASK,
    OUT_VARIABLE,
)
from obsmask_core.mitm.addons import obsmask_addons
from obsmask_core.mitm.flows import CONVERSATION_METADATA

HOOKS = ("requestheaders", "request", "responseheaders", "response", "error")

Hook = Callable[[http.HTTPFlow], object]

times: defaultdict[str, defaultdict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
# The kind of the flow whose hook runs ("-" between hooks): one client,
# one flow at a time.
current_kind = "-"
# obsmask's log records handled in the hooks of the flow under way, and
# those handled between hooks since the last flow was filed (one client: the
# lines of about one flow, the usage line of the one before included): their
# time and number, filed once its hooks are done (WriteTimes.response, the
# last addon's).
pending_records = [0.0, 0.0]
later_records = [0.0, 0.0]


def _kind(flow: http.HTTPFlow) -> str:
    return flow.request.query.get("k", "-")


def _timed_hook(name: str, hook: Hook) -> Hook:
    def timed(flow: http.HTTPFlow) -> object:
        global current_kind
        kind = current_kind = _kind(flow)
        started = time.perf_counter()
        try:
            result = hook(flow)
        finally:
            current_kind = "-"  # what is logged between hooks is no flow's
        took = time.perf_counter() - started
        if inspect.isawaitable(result):
            # An async hook's coroutine (the gateway's, recall's) or work
            # handed to a worker: what mitmproxy awaits is timed too, and added.
            return _awaited(result, kind, name, took)
        times[kind][name].append(took)
        return result

    if not inspect.iscoroutinefunction(hook):
        return timed

    # An async hook stays a coroutine function: mitmproxy tells them apart.
    async def timed_async(flow: http.HTTPFlow) -> object:
        pending = timed(flow)
        assert inspect.isawaitable(pending)
        return await pending

    return timed_async


async def _awaited(pending: Awaitable[object], kind: str, name: str, took: float) -> object:
    global current_kind
    current_kind = kind
    started = time.perf_counter()
    try:
        result = await pending
    finally:
        current_kind = "-"
    times[kind][name].append(took + time.perf_counter() - started)
    return result


_backup = mitmproxy_flow.Flow.backup
_handle = logging.Logger.handle


def _timed_backup(flow: mitmproxy_flow.Flow, force: bool = False) -> None:
    started = time.perf_counter()
    _backup(flow, force)  # type: ignore[no-untyped-call]  # mitmproxy: no annotations
    times[current_kind][BACKUP].append(time.perf_counter() - started)


def _timed_handle(logger: logging.Logger, record: logging.LogRecord) -> None:
    started = time.perf_counter()
    _handle(logger, record)
    if record.name.startswith("obsmask_core"):
        tally = pending_records if current_kind != "-" else later_records
        tally[0] += time.perf_counter() - started
        tally[1] += 1


# mitmproxy's own, and logging's, patched in this benchmark's mitmdump only.
mitmproxy_flow.Flow.backup = _timed_backup  # type: ignore[method-assign]
logging.Logger.handle = _timed_handle  # type: ignore[method-assign, assignment]


class WriteTimes:
    """When a flow's hooks are done (this addon is the last): its masking
    time, as its summary records it, and its log records; at ``done``,
    every time, in seconds, by kind and by what was timed."""

    def response(self, flow: http.HTTPFlow) -> None:
        kind = _kind(flow)
        facts = flow.metadata.get(CONVERSATION_METADATA)
        mask_ms = facts.get("mask_ms") if isinstance(facts, dict) else None
        if isinstance(mask_ms, float | int):
            times[kind][MASK].append(mask_ms / 1000)
        for tally, total, count in ((pending_records, LOG_RECORDS, LOG_RECORD_COUNT),
                                    (later_records, LATER_LOG_RECORDS, LATER_LOG_RECORD_COUNT)):
            times[kind][total].append(tally[0])
            times[kind][count].append(tally[1])
            tally[:] = [0.0, 0.0]

    def done(self) -> None:
        with open(os.environ[OUT_VARIABLE], "w", encoding="utf-8") as out:
            json.dump(times, out)


def _timed(addon: object) -> object:
    for hook_name in HOOKS:
        hook = getattr(addon, hook_name, None)
        if hook is not None:
            setattr(addon, hook_name, _timed_hook(f"{type(addon).__name__}.{hook_name}", hook))
    return addon


addons = [*(_timed(addon) for addon in obsmask_addons()), WriteTimes()]
