"""Work a hook puts off (``after_this_turn``), and a flow's info lines
(``log_once_sent``), never hold the flow: on the event loop they wait two
turns (mitmproxy writes the request or the answer before that, eager tasks
or not), and a line names the hook's place; off the loop, or for a flow
nobody waits for (read from a file), they are done at once."""

from __future__ import annotations

import asyncio
import logging

import pytest
from mitmproxy.test import tflow

from obsmask_core.mitm.flows import after_this_turn, log_once_sent

logger = logging.getLogger("obsmask_core.tests.flow_lines")


def a_hook(flow: tflow.HTTPFlow, text: str) -> None:
    log_once_sent(flow, logger, "obsmask: %s", text)


A_HOOK_LINE = a_hook.__code__.co_firstlineno + 1


def test_on_the_event_loop_the_line_waits_two_turns_and_names_the_hook(caplog):
    async def on_the_loop() -> list[int]:
        a_hook(tflow.tflow(), "masked 3 of 5")
        written = [len(caplog.records)]
        for _ in range(2):
            await asyncio.sleep(0)
            written.append(len(caplog.records))
        return written

    with caplog.at_level(logging.INFO):
        written = asyncio.run(on_the_loop())
    # Not in the hook, not on the next turn (eager tasks resume the flow
    # then), but on the one after.
    assert written == [0, 0, 1]
    [record] = caplog.records
    assert record.getMessage() == "obsmask: masked 3 of 5"
    assert record.levelno == logging.INFO and record.name == logger.name
    assert record.funcName == "a_hook" and record.pathname == __file__
    assert record.lineno == A_HOOK_LINE


def test_off_the_loop_the_line_is_written_at_once(caplog):
    with caplog.at_level(logging.INFO):
        a_hook(tflow.tflow(), "masked 1 of 2")
        assert [r.getMessage() for r in caplog.records] == ["obsmask: masked 1 of 2"]
    assert caplog.records[0].funcName == "a_hook"


def test_for_a_flow_read_from_a_file_the_work_is_done_at_once_even_on_the_loop():
    """A replay (mitmdump -nr) waits for nobody: putting work off would
    keep every flow of the file until its end."""
    replayed = tflow.tflow()
    replayed.live = False
    done: list[str] = []

    async def on_the_loop() -> list[str]:
        after_this_turn(replayed, done.append, "counted")
        return list(done)

    assert asyncio.run(on_the_loop()) == ["counted"]


@pytest.mark.parametrize("level", [logging.WARNING, logging.ERROR])
def test_a_line_below_the_logger_s_level_is_not_even_made(caplog, monkeypatch, level):
    def no_record(*args: object, **kwargs: object) -> logging.LogRecord:
        raise AssertionError("a record was made for a line nobody reads")

    monkeypatch.setattr(logger, "makeRecord", no_record)
    with caplog.at_level(level, logger=logger.name):
        a_hook(tflow.tflow(), "masked 1 of 2")
    assert caplog.records == []
