"""obsmask's log records go to mitmproxy's deprecated ``add_log`` event only
while an addon has that hook: the event costs most of what a record costs
the proxy, and nothing in mitmproxy listens to it. mitmproxy's own records,
and every other handler (the terminal's, mitmweb's event log), are left
alone."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pytest
from mitmproxy import hooks
from mitmproxy.log import LegacyLogEvents
from mitmproxy.test import taddons

from obsmask_core.mitm.add_log_event import AddLogEventFilter, OnlyWhenHeard
from obsmask_core.mitm.addons import obsmask_addons

OURS = logging.getLogger("obsmask_core.tests.add_log_event")
MITMPROXY_S = logging.getLogger("mitmproxy.tests.add_log_event")


class Listener:
    """A third-party addon still on the deprecated hook."""

    def __init__(self) -> None:
        self.entries: list[str] = []

    def add_log(self, entry: object) -> None:
        self.entries.append(str(entry))


class Lines(logging.Handler):
    """Another handler of the root logger (as the terminal's is)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def legacy_handler(master: object) -> LegacyLogEvents:
    [handler] = [h for h in logging.getLogger().handlers
                 if isinstance(h, LegacyLogEvents) and h.master is master]
    return handler


def passed_on_by(handler: LegacyLogEvents, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The messages of the records ``handler`` passes on to the event."""
    passed_on: list[str] = []
    monkeypatch.setattr(handler, "emit", lambda record: passed_on.append(record.getMessage()))
    return passed_on


@contextlib.contextmanager
def running(monkeypatch: pytest.MonkeyPatch) -> Iterator[
        tuple[taddons.context, AddLogEventFilter, list[str]]]:
    """mitmproxy's test master running obsmask's addon, and the messages of
    the records its ``add_log`` handler passes on to the event; the addon
    is done at the end. (Made in the test itself: mitmproxy's handlers pass
    only the records of the test step that made them.)"""
    addon = AddLogEventFilter()
    with taddons.context(addon) as tctx:
        tctx.master.addons.invoke_addon_sync(addon, hooks.RunningHook())
        try:
            yield tctx, addon, passed_on_by(legacy_handler(tctx.master), monkeypatch)
        finally:
            tctx.master.addons.invoke_addon_sync(addon, hooks.DoneHook())


def log_both() -> None:
    with_level = logging.getLogger().level
    logging.getLogger().setLevel(logging.DEBUG)  # as mitmdump sets it
    try:
        OURS.info("obsmask: POST /v1/messages masked 3 of 5")
        MITMPROXY_S.info("client connect")
    finally:
        logging.getLogger().setLevel(with_level)


BOTH = ["obsmask: POST /v1/messages masked 3 of 5", "client connect"]


def test_with_no_addon_on_the_hook_only_mitmproxy_s_own_records_reach_the_event(monkeypatch):
    lines = Lines()
    logging.getLogger().addHandler(lines)
    try:
        with running(monkeypatch) as (_, _, passed_on):
            log_both()
    finally:
        logging.getLogger().removeHandler(lines)
    assert passed_on == ["client connect"]
    assert lines.lines == BOTH  # every other handler gets obsmask's lines


def test_an_addon_on_the_hook_gets_obsmask_s_records_until_it_goes(monkeypatch):
    with running(monkeypatch) as (tctx, _, passed_on):
        listener = Listener()
        tctx.master.addons.add(listener)
        passed_on.clear()  # mitmproxy's warning that the hook is deprecated
        log_both()
        assert passed_on == BOTH
        tctx.master.addons.remove(listener)
        log_both()
    assert passed_on[2:] == ["client connect"]


def test_an_addon_on_the_hook_inside_another_counts_as_mitmproxy_walks_them(monkeypatch):
    class Holder:
        def __init__(self) -> None:
            self.addons = [Listener()]

    with running(monkeypatch) as (tctx, _, passed_on):
        tctx.master.addons.add(Holder())
        log_both()
    assert BOTH[0] in passed_on


def test_another_master_s_handler_is_left_as_it_was(monkeypatch):
    """Two masters in one process (tests do it): the filter goes on the
    handler of the master obsmask runs in, and asks that master's addons;
    the other master's listener still gets obsmask's lines."""
    with taddons.context(Listener()) as other:
        others = passed_on_by(legacy_handler(other.master), monkeypatch)
        with running(monkeypatch) as (_, _, passed_on):
            others.clear()
            log_both()
            assert legacy_handler(other.master).filters == []
    assert passed_on == ["client connect"]
    assert others == BOTH


def test_when_the_addon_is_done_the_handler_passes_every_record_again(monkeypatch):
    with running(monkeypatch) as (tctx, addon, passed_on):
        tctx.master.addons.invoke_addon_sync(addon, hooks.DoneHook())
        log_both()
        assert legacy_handler(tctx.master).filters == []
    assert passed_on == BOTH


def test_running_twice_puts_one_filter_on_the_handler(monkeypatch):
    with running(monkeypatch) as (tctx, addon, _):
        tctx.master.addons.invoke_addon_sync(addon, hooks.RunningHook())
        assert len(legacy_handler(tctx.master).filters) == 1


def record_of_ours() -> logging.LogRecord:
    return OURS.makeRecord(OURS.name, logging.INFO, __file__, 1, "obsmask: x", (), None)


def test_when_asking_who_listens_fails_the_record_goes_through_and_the_log_says_why_once(
        caplog):
    def broken() -> bool:
        raise RuntimeError("an addon half loaded")

    only_when_heard = OnlyWhenHeard(broken)
    with caplog.at_level(logging.ERROR):
        assert only_when_heard.filter(record_of_ours()) is True
        assert only_when_heard.filter(record_of_ours()) is True
    [line] = caplog.records
    assert "add_log" in line.getMessage() and line.exc_info is not None
    assert "an addon half loaded" in caplog.text


def test_a_record_of_mitmproxy_s_goes_through_whatever_the_answer():
    record = MITMPROXY_S.makeRecord(MITMPROXY_S.name, logging.INFO, __file__, 1, "x", (), None)
    assert OnlyWhenHeard(lambda: False).filter(record) is True
    assert OnlyWhenHeard(lambda: False).filter(record_of_ours()) is False


def test_obsmask_loads_the_filter_with_its_addons():
    assert any(isinstance(addon, AddLogEventFilter) for addon in obsmask_addons())
