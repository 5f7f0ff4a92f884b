"""A big request body is masked on a worker thread while mitmproxy's event
loop goes on moving every other flow; a small one inline. Either way the
flow ends up the same, it is changed only on the loop, and a failure on the
worker leaves it as the client sent it, with the traceback in the log."""

from __future__ import annotations

import asyncio
import gc
import gzip
import json
import logging
import random
import sys
import threading

from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.mitm.off_loop import OFF_LOOP_BYTES, OffLoop
from support.chat import body, conversation
from support.conversation_flows import chat_flow


def big_body() -> bytes:
    turns = 4
    while len(content := body(conversation(turns=turns))) < OFF_LOOP_BYTES:
        turns *= 2
    return content


def threads_that_mask(monkeypatch) -> list[str]:
    names: list[str] = []
    mask = Masker.mask

    def recording(*args, **kwargs):
        names.append(threading.current_thread().name)
        return mask(*args, **kwargs)

    monkeypatch.setattr(Masker, "mask", recording)
    return names


def test_a_big_body_is_masked_on_a_worker_thread_into_the_same_bytes_as_inline(
        masking, monkeypatch):
    content = big_body()
    inline = chat_flow(content)
    masking.request(inline)  # no event loop running: done inline
    names = threads_that_mask(monkeypatch)
    flow = chat_flow(content)

    async def hook() -> None:
        pending = masking.request(flow)
        assert pending is not None  # an awaitable: mitmproxy waits for it
        await pending

    asyncio.run(hook())
    assert names[-1].startswith("obsmask-off-loop")
    assert flow.metadata["obsmask"]["action"] == "masked"
    assert flow.request.raw_content == inline.request.raw_content
    assert flow.comment == inline.comment and flow.marked == inline.marked
    flow.revert()
    assert flow.request.raw_content == content


def test_a_small_body_is_masked_inline_even_with_a_loop_running(masking, monkeypatch):
    names = threads_that_mask(monkeypatch)
    flow = chat_flow(body(conversation(turns=3)))

    async def hook() -> object:
        return masking.request(flow)

    assert asyncio.run(hook()) is None
    assert names == [threading.current_thread().name]
    assert flow.metadata["obsmask"]["action"] == "masked"


def test_the_loop_moves_other_tasks_while_a_big_body_is_masked(masking, monkeypatch):
    """The worker waits until another task of the loop has run: were the
    rewrite on the loop, that task could never run and the wait would end
    only at its timeout."""
    other_task_ran = threading.Event()
    mask = Masker.mask

    def waiting(*args, **kwargs):
        assert other_task_ran.wait(10), "no other task ran while the body was masked"
        return mask(*args, **kwargs)

    monkeypatch.setattr(Masker, "mask", waiting)
    flow = chat_flow(big_body())

    async def other_task() -> None:
        await asyncio.sleep(0)
        other_task_ran.set()

    async def both() -> None:
        pending = masking.request(flow)
        assert pending is not None
        await asyncio.gather(pending, other_task())

    asyncio.run(both())
    assert flow.metadata["obsmask"]["action"] == "masked"


def test_a_failure_on_the_worker_leaves_the_flow_as_sent_and_logs_the_traceback(
        masking, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("planner bug")

    monkeypatch.setattr(Masker, "mask", broken)
    content = big_body()
    flow = chat_flow(content)

    async def hook() -> None:
        pending = masking.request(flow)
        assert pending is not None
        await pending  # must not raise into mitmproxy

    with caplog.at_level(logging.ERROR):
        asyncio.run(hook())
    assert flow.request.raw_content == content and not flow.modified()
    [record] = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert "forwarded unchanged" in record.getMessage()
    assert record.exc_info is not None and "planner bug" in str(record.exc_info[1])


def test_a_compressed_body_is_judged_by_its_decoded_size(masking, monkeypatch):
    """gzip shrinks JSON 8x or more, and decoding is part of the work moved:
    a body smaller than the threshold on the wire still goes to the worker."""
    messages: list[object] = [{"role": "user", "content": "go"}]
    # Each turn ~20,000 bytes compressed: past an eighth of the threshold.
    for turn in range(OFF_LOOP_BYTES // 8 // 20_000 + 4):
        messages.append({"role": "assistant", "tool_calls": [{
            "id": f"c{turn}", "type": "function",
            "function": {"name": "bash", "arguments": "{}"}}]})
        # Hex of random bytes: gzip takes it to about half.
        messages.append({"role": "tool", "tool_call_id": f"c{turn}",
                         "content": random.Random(turn).randbytes(20_000).hex()})
    content = json.dumps({"model": "m", "messages": messages}).encode()
    compressed = gzip.compress(content)
    assert OFF_LOOP_BYTES // 8 < len(compressed) < len(content) < OFF_LOOP_BYTES
    names = threads_that_mask(monkeypatch)
    flow = chat_flow(b"")
    flow.request.headers["content-encoding"] = "gzip"
    flow.request.raw_content = compressed

    async def hook() -> None:
        pending = masking.request(flow)
        assert pending is not None
        await pending

    asyncio.run(hook())
    assert names[-1].startswith("obsmask-off-loop")
    assert flow.metadata["obsmask"]["action"] == "masked"
    assert gzip.decompress(flow.request.raw_content) != content


def test_the_collector_pauses_in_every_rewrite_and_the_gil_changes_hands_faster_only_on_a_worker(
        masking, monkeypatch):
    """Parsing a body sets off garbage collections that hold the GIL (full
    ones were the longest stalls of the loop): they wait until the work is
    done, on the worker and inline alike; the GIL changes hands faster only
    while a worker runs; and the interpreter's settings are as they were
    afterwards."""
    seen: list[tuple[bool, float]] = []
    mask = Masker.mask

    def recording(*args, **kwargs):
        seen.append((gc.isenabled(), sys.getswitchinterval()))
        return mask(*args, **kwargs)

    monkeypatch.setattr(Masker, "mask", recording)
    interval = sys.getswitchinterval()
    flow = chat_flow(big_body())

    async def hook() -> None:
        pending = masking.request(flow)
        assert pending is not None
        await pending

    assert gc.isenabled()
    asyncio.run(hook())
    assert seen == [(False, min(interval, 0.0005))]
    assert gc.isenabled() and sys.getswitchinterval() == interval
    assert flow.metadata["obsmask"]["action"] == "masked"

    small = chat_flow(body(conversation(turns=8)))
    assert masking.request(small) is None  # inline
    assert seen[1:] == [(False, interval)]
    assert gc.isenabled() and small.metadata["obsmask"]["action"] == "masked"


def test_pauses_that_overlap_switch_the_collector_back_on_only_at_the_last_end():
    """The event loop and the worker may pause the collector at once: the
    first to end must not switch it back on under the other; and a
    collector the user switched off stays off."""
    without_collector = OffLoop().without_collector

    inside_first: list[bool] = []
    first_in, second_done = threading.Event(), threading.Event()

    def first() -> None:
        first_in.set()
        second_done.wait(5)
        inside_first.append(gc.isenabled())

    worker = threading.Thread(target=lambda: without_collector(first))
    worker.start()
    first_in.wait(5)
    without_collector(lambda: None)  # starts and ends while the first runs
    second_done.set()
    worker.join(5)
    assert inside_first == [False] and gc.isenabled()

    gc.disable()
    try:
        without_collector(lambda: None)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_two_worker_threads_that_overlap_leave_the_interpreters_switch_interval_as_it_was():
    """A reloaded script makes a new OffLoop while the old one's work may
    still run: the second must not take the lowered interval for the
    interpreter's own and leave it lowered once both are done."""
    before = sys.getswitchinterval()
    first_out, second_out = threading.Event(), threading.Event()

    async def both() -> None:
        old, new = OffLoop(), OffLoop()
        first = asyncio.create_task(old.run(lambda: first_out.wait(5)))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(new.run(lambda: second_out.wait(5)))
        await asyncio.sleep(0.05)
        first_out.set()
        await first
        second_out.set()
        await second

    asyncio.run(both())
    assert sys.getswitchinterval() == before


def test_once_the_proxy_runs_the_objects_made_at_start_up_are_left_out_of_collections_once(
        masking, monkeypatch):
    """A full collection walks every object while it holds the GIL: the
    modules, classes and functions made at start-up are frozen out of them
    when the proxy starts running, and only once (a reloaded script does
    not freeze what the proxy made since)."""
    gc.unfreeze()
    try:
        masking.running()
        frozen = gc.get_freeze_count()
        assert frozen > 1000
        made_since = [[n] for n in range(5000)]
        masking.running()
        # Frozen objects freed meanwhile (the token loader's, on its thread)
        # leave the count: at most what it was, and not 5,000 more.
        assert gc.get_freeze_count() <= frozen
        assert len(made_since) == 5000
    finally:
        gc.unfreeze()
