"""bench_rewrite's sessions per shape of traffic, and its per-shape report:
a Claude Code-shaped session is every request as Claude Code sends it (its
breakpoint moving from each request's last block to the next one's), not
its last body cut; the ratios are total time over total time, per shape,
with issue 43's targets said met or not."""

from __future__ import annotations

import itertools
import json

import pytest

from benchlib.cache.claude_code import claude_code_tools
from benchlib.current_models import SHAPE_MODELS, named
from benchlib.one_request.rewrite_report import BodyFigures, per_shape, ratios
from benchlib.one_request.shapes import CLAUDE_CODE, SHAPES, cut_requests, shaped_sessions
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT
from support.processes import REPO

SESSIONS = REPO / "fixtures" / "sessions"
SMALLEST = "deepseek_reasoner_dev__sqlfluff__sqlfluff-2419.json"
EPHEMERAL = {"type": "ephemeral"}


def _marks(document: dict[str, object]) -> list[tuple[int, int]]:
    """(message, block) of every content block with a cache_control."""
    messages = document["messages"]
    assert isinstance(messages, list)
    return [(m, b) for m, message in enumerate(messages)
            if isinstance(message["content"], list)
            for b, block in enumerate(message["content"]) if "cache_control" in block]


def _unmarked(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{**message, "content": [{k: v for k, v in block.items() if k != "cache_control"}
                                    for block in message["content"]]}
            if isinstance(message["content"], list) else message for message in messages]


@pytest.fixture(scope="module")
def claude_code() -> list[dict[str, object]]:
    (session,) = shaped_sessions([SESSIONS / "anthropic" / SMALLEST], [CLAUDE_CODE])
    assert (session.shape, session.name, session.fmt) == (
        CLAUDE_CODE, f"claude_code/{SMALLEST}", ANTHROPIC)
    return [json.loads(body) for body in session.requests]


def test_every_claude_code_request_carries_its_breakpoint_on_its_own_last_block(claude_code):
    assert len(claude_code) > 10
    for document in claude_code:
        messages = document["messages"]
        last = len(messages) - 1
        assert _marks(document) == [(last, len(messages[last]["content"]) - 1)]
        assert [block["cache_control"] for block in document["system"]] == [EPHEMERAL] * 2
        assert document["tools"] == claude_code_tools()


def test_the_next_claude_code_request_is_the_one_before_with_its_breakpoint_moved_on(
        claude_code):
    for before, after in itertools.pairwise(claude_code):
        count = len(before["messages"])
        assert len(after["messages"]) > count
        assert after["messages"][:count] == _unmarked(before["messages"])
        assert {k: v for k, v in after.items() if k != "messages"} == \
            {k: v for k, v in before.items() if k != "messages"}


def test_claude_codes_reminders_stay_in_the_history(claude_code):
    def reminders(document: dict[str, object]) -> list[int]:
        return [position for position, message in enumerate(document["messages"])
                if message["role"] == "system"
                and message["content"][0]["text"].startswith("<system-reminder>")]

    last = reminders(claude_code[-1])
    assert len(last) >= 3
    assert any(reminders(document)[-1:] == [len(document["messages"]) - 1]
               for document in claude_code)  # a request ends with one, marked
    for document in claude_code:
        assert reminders(document) == [p for p in last if p < len(document["messages"])]


def test_the_formats_shapes_are_the_last_body_cut_before_each_answer():
    body = (SESSIONS / "chat" / SMALLEST).read_bytes()
    requests = cut_requests(body, CHAT)
    assert requests[-1] == body
    whole = json.loads(body)
    answers = [p for p, m in enumerate(whole["messages"]) if m["role"] == "assistant" and p]
    assert [len(json.loads(r)["messages"]) for r in requests[:-1]] == answers
    for request in requests[:-1]:
        document = json.loads(request)
        count = len(document.pop("messages"))
        assert document == {k: v for k, v in whole.items() if k != "messages"}
        assert json.loads(request)["messages"] == whole["messages"][:count]


def test_every_shape_by_default_and_claude_code_after_the_formats():
    paths = [SESSIONS / folder / SMALLEST for folder in ("anthropic", "chat", "responses")]
    sessions = shaped_sessions(paths)
    assert [s.shape for s in sessions] == ["anthropic", "chat", "responses", "claude_code"]
    assert SHAPES == ("chat", "anthropic", "responses", "claude_code")
    assert [s.shape for s in shaped_sessions(paths, ["responses"])] == ["responses"]
    with pytest.raises(ValueError, match="shapes are"):
        shaped_sessions(paths, ["claude"])


def _row(shape: str, size: int, next_ms: float, warm: float, cold: float, floor: float,
         reused: bool = False) -> BodyFigures:
    return {"shape": shape, "format": "anthropic", "bytes": size, "outcome": "Masked",
            "runs": 7, "mask_next_ms": next_ms, "mask_warm_ms": warm, "mask_cold_ms": cold,
            "orjson_ms": floor, "json_ms": 4 * floor, "mask_over_orjson": next_ms / floor,
            "next_reused": reused, "session_requests": 10, "session_masked": 8,
            "session_reused": 3, "session_mask_ms": 2 * next_ms * 10,
            "session_orjson_ms": floor * 10,
            "session_mask_over_orjson": 2 * next_ms / floor}


def test_the_ratios_are_total_time_over_total_time_per_shape_with_the_targets():
    rows = [_row("chat", 50_000, 1.0, 0.5, 10.0, 1.0, reused=True),
            _row("chat", 200_000, 3.0, 1.5, 10.0, 2.0),
            _row("claude_code", 300_000, 6.0, 1.0, 20.0, 2.0)]
    assert ratios(rows)["mask_next_over_orjson"] == 2.0
    shapes = per_shape(rows)
    assert list(shapes) == ["chat", "claude_code"]
    chat = shapes["chat"]
    assert (chat["bodies"], chat["bodies_100kb"], chat["bytes_min"], chat["bytes_max"]) == (
        2, 1, 50_000, 200_000)
    assert chat["mask_next_over_orjson"] == round(4 / 3, 2)
    assert chat["mask_warm_over_orjson"] == round(2 / 3, 2)
    assert chat["mask_cold_over_orjson"] == round(20 / 3, 2)
    assert chat["mask_cold_over_orjson_100kb"] == 5.0  # the 200 kB body alone
    assert chat["session_mask_over_orjson"] == round(80 / 30, 2)
    assert chat["worst_body_mask_over_orjson"] == 1.5
    assert (chat["next_reused"], chat["session_requests"], chat["session_masked"],
            chat["session_reused"]) == (1, 20, 16, 6)
    assert {name: t["met"] for name, t in chat["targets"].items()} == {
        "mask_next_over_orjson": True, "session_mask_over_orjson": False,
        "mask_cold_over_orjson_100kb": True, "mask_warm_over_orjson": True}
    assert (chat["targets_met"], chat["targets_total"]) == (3, 4)
    assert shapes["claude_code"]["targets"]["mask_next_over_orjson"] == {
        "value": 3.0, "target": "<= 2", "met": False}


def test_a_shape_without_a_large_body_has_no_first_request_figure_and_misses_that_target():
    shape = per_shape([_row("chat", 50_000, 1.0, 0.5, 10.0, 1.0)])["chat"]
    assert shape["mask_cold_over_orjson_100kb"] is None
    assert shape["targets"]["mask_cold_over_orjson_100kb"]["met"] is False


def test_each_shape_names_a_current_model_and_keeps_every_other_byte():
    """The fixtures were recorded with DeepSeek's ids, which the model
    table does not know; the benchmark's traffic names a model people run
    today, the request otherwise byte for byte the recorded one."""
    paths = [SESSIONS / fmt / SMALLEST for fmt in ("chat", "anthropic", "responses")]
    recorded = {s.name: s for s in shaped_sessions(paths, models={})}
    for session in shaped_sessions(paths):
        assert json.loads(session.body)["model"] == SHAPE_MODELS[session.shape]
        before = recorded[session.name].body
        old = json.loads(before)["model"]
        assert old.startswith("deepseek-")
        if session.shape != CLAUDE_CODE:
            new = f'"{SHAPE_MODELS[session.shape]}"'.encode()
            assert session.body.replace(new, f'"{old}"'.encode()) == before


def test_a_model_is_named_at_the_top_level_never_inside_the_list():
    body = (b'{"messages": [{"role": "user", "content": "x", "model": "inner"}], '
            b'"model":"outer", "stream": true}')
    renamed = named(body, "gpt-5.6")
    assert renamed == body.replace(b'"outer"', b'"gpt-5.6"')
    assert named(body, None) is body
    with pytest.raises(ValueError):
        named(b'{"messages": []}', "gpt-5.6")
