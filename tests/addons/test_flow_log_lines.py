"""A flow's info line never holds the flow: on the event loop it is written
on the loop's next turn (after mitmproxy has sent on what the hook let
through), naming the hook's place; off the loop it is written at once."""

from __future__ import annotations

import asyncio
import logging

import pytest

from obsmask_core.mitm.flows import log_once_sent

logger = logging.getLogger("obsmask_core.tests.flow_lines")


def a_hook(text: str) -> None:
    log_once_sent(logger, "obsmask: %s", text)


A_HOOK_LINE = a_hook.__code__.co_firstlineno + 1


def test_on_the_event_loop_the_line_waits_for_the_loop_s_next_turn_and_names_the_hook(caplog):
    async def on_the_loop() -> int:
        a_hook("masked 3 of 5")
        written_in_the_hook = len(caplog.records)
        await asyncio.sleep(0)
        return written_in_the_hook

    with caplog.at_level(logging.INFO):
        written_in_the_hook = asyncio.run(on_the_loop())
    assert written_in_the_hook == 0
    [record] = caplog.records
    assert record.getMessage() == "obsmask: masked 3 of 5"
    assert record.levelno == logging.INFO and record.name == logger.name
    assert record.funcName == "a_hook" and record.pathname == __file__
    assert record.lineno == A_HOOK_LINE


def test_off_the_loop_the_line_is_written_at_once(caplog):
    with caplog.at_level(logging.INFO):
        a_hook("masked 1 of 2")
        assert [r.getMessage() for r in caplog.records] == ["obsmask: masked 1 of 2"]
    assert caplog.records[0].funcName == "a_hook"


@pytest.mark.parametrize("level", [logging.WARNING, logging.ERROR])
def test_a_line_below_the_logger_s_level_is_not_even_made(caplog, monkeypatch, level):
    def no_record(*args: object, **kwargs: object) -> logging.LogRecord:
        raise AssertionError("a record was made for a line nobody reads")

    monkeypatch.setattr(logger, "makeRecord", no_record)
    with caplog.at_level(level, logger=logger.name):
        a_hook("masked 1 of 2")
    assert caplog.records == []
