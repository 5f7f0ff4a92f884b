"""A request's key in the table of when conversations were last seen
(``conversation/billing/history_key.py``): a digest of its history as the
provider's cache reads it (model, tools, system prompt, then the items),
the same for the same history whatever request it ends, so a request's
previous key is its conversation's previous request's own key; a first
request has none. Moving a cache breakpoint changes nothing; any other
change of what the cache reads does, and a text that only looks like a
breakpoint is text."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.conversation.billing.history_key import HistoryKey, history_key, history_of
from support.chat import system
from support.formats import (
    CLAUDE_CODE_SYSTEM,
    claude_code_body,
    session,
    to_anthropic,
    to_chat,
)

Json = dict[str, object]
EPHEMERAL = {"type": "ephemeral"}


def answer_starts(items: list[object]) -> list[int]:
    """Where the model's answers begin: its messages."""
    return [number for number, item in enumerate(items)
            if isinstance(item, dict) and item.get("role") == "assistant"]


def key_of(members: Json, items: list[object]) -> HistoryKey:
    return history_key(members, items, answer_starts(items))


def requests_of(items: list[object]) -> list[list[object]]:
    """The requests of a conversation: each ends just before an answer,
    the last one with every item."""
    return [items[:start] for start in answer_starts(items)] + [items]


CHAT_MEMBERS: Json = {"model": "gpt-5", "tools": [
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]}
ANTHROPIC_TOOLS = [{"name": "bash", "description": "Run a command.",
                    "input_schema": {"type": "object"}}]


def chat_items() -> list[object]:
    return [system(), *to_chat(session(4))]


def anthropic_request(items: list[object]) -> tuple[Json, list[object]]:
    """Members and items as Claude Code sends them: marked system blocks,
    and a breakpoint on the last block of the last message, which moves
    from request to request."""
    body = {**claude_code_body(items), "tools": ANTHROPIC_TOOLS}
    messages = body.pop("messages")
    assert isinstance(messages, list)
    return body, messages


def test_each_chat_request_keys_its_previous_request_by_that_requests_own_key():
    keys = [key_of(CHAT_MEMBERS, request) for request in requests_of(chat_items())]
    assert len(keys) == 5 and len({key.own for key in keys}) == 5
    assert keys[0].previous is None
    assert [key.previous for key in keys[1:]] == [key.own for key in keys[:-1]]


def test_each_anthropic_request_keys_its_previous_request_whose_breakpoint_was_elsewhere():
    """Each request of Claude Code marks its own last block: the previous
    request's breakpoint is gone from the same block in the next one."""
    keys = [key_of(*anthropic_request(request))
            for request in requests_of(to_anthropic(session(4)))]
    assert len(keys) == 5 and len({key.own for key in keys}) == 5
    assert keys[0].previous is None
    assert [key.previous for key in keys[1:]] == [key.own for key in keys[:-1]]


@pytest.mark.parametrize("items", [
    [system(), {"role": "user", "content": "Fix the bug."}],
    [{"role": "user", "content": "Fix the bug."}],
    [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Fix it."}],
])
def test_a_request_before_any_earlier_request_has_no_previous_key(items):
    """No answer yet, or one at the very start (no request could have ended
    before it)."""
    assert key_of(CHAT_MEMBERS, items).previous is None


def test_the_previous_key_is_the_history_up_to_the_latest_answer_whatever_follows_it():
    items = chat_items()
    starts = answer_starts(items)
    extended = [*items, {"role": "user", "content": "And now the docs."}]
    assert key_of(CHAT_MEMBERS, extended).previous == key_of(CHAT_MEMBERS,
                                                             items[:starts[-1]]).own
    assert history_key(CHAT_MEMBERS, items, starts[:-1]).previous == key_of(
        CHAT_MEMBERS, items[:starts[-2]]).own


# A breakpoint moved ----------------------------------------------------------------------


def marked(request: Json, *path: object, first: bool = False,
           control: Json | None = None) -> Json:
    """``request`` with a breakpoint on the object at ``path``: as its last
    member, or its first."""
    request = copy.deepcopy(request)
    parent: object = request
    for step in path[:-1]:
        parent = parent[step]
    target = parent[path[-1]]
    assert isinstance(target, dict)
    control = dict(control or EPHEMERAL)
    parent[path[-1]] = {"cache_control": control, **target} if first \
        else {**target, "cache_control": control}
    return request


def anthropic_body() -> Json:
    items = to_anthropic(session(3))
    return {"model": "claude-sonnet-4-5", "tools": copy.deepcopy(ANTHROPIC_TOOLS),
            "system": [{"type": "text", "text": "You are a coding agent."},
                       {"type": "text", "text": "Use the tools."}],
            "messages": items}


def body_key(body: Json) -> HistoryKey:
    messages = body["messages"]
    assert isinstance(messages, list)
    return key_of(body, messages)


BREAKPOINTS: dict[str, Callable[[Json], Json]] = {
    "last block of the last message": lambda b: marked(b, "messages", -1, "content", -1),
    "first member of a block": lambda b: marked(b, "messages", -1, "content", 0, first=True),
    "a tool result in an earlier request": lambda b: marked(b, "messages", 2, "content", 0),
    "an answer's tool call": lambda b: marked(b, "messages", 1, "content", -1),
    "a system block": lambda b: marked(b, "system", 1),
    "the first system block, first": lambda b: marked(b, "system", 0, first=True),
    "the last tool": lambda b: marked(b, "tools", -1),
    "the last tool, first": lambda b: marked(b, "tools", -1, first=True),
    "an hour-long one": lambda b: marked(b, "messages", 0, "content", 0,
                                         control={"type": "ephemeral", "ttl": "1h"}),
    "four at once": lambda b: marked(marked(marked(marked(
        b, "tools", 0), "system", 0, first=True), "messages", 2, "content", 0),
        "messages", -1, "content", -1),
}


@pytest.mark.parametrize("breakpoint", BREAKPOINTS.values(), ids=BREAKPOINTS.keys())
def test_a_breakpoint_added_or_taken_away_changes_neither_key(breakpoint):
    body = anthropic_body()
    with_it = breakpoint(body)
    assert with_it != body
    assert body_key(with_it) == body_key(body)
    assert body_key(with_it).previous is not None


def test_claude_codes_marked_system_keys_as_the_same_system_unmarked():
    plain = [{key: value for key, value in block.items() if key != "cache_control"}
             for block in CLAUDE_CODE_SYSTEM]
    items = to_anthropic(session(2))
    assert key_of({"model": "m", "system": CLAUDE_CODE_SYSTEM}, items) == key_of(
        {"model": "m", "system": plain}, items)


# Anything else changed -------------------------------------------------------------------


def changed(edit: Callable[[Json], None]) -> Callable[[Json], Json]:
    def change(body: Json) -> Json:
        body = copy.deepcopy(body)
        edit(body)
        return body
    return change


def _set(path: tuple[object, ...], value: object) -> Callable[[Json], None]:
    def edit(body: Json) -> None:
        parent: object = body
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = value
    return edit


# (what changes, whether the previous request saw it too)
CHANGES: dict[str, tuple[Callable[[Json], Json], bool]] = {
    "the model": (changed(_set(("model",), "claude-opus-4-1")), True),
    "the system prompt": (changed(_set(("system", 1, "text"), "Use the tools!")), True),
    "a tool's description": (changed(_set(("tools", 0, "description"), "Run it.")), True),
    "a tool added": (changed(lambda b: b["tools"].append(
        {"name": "read", "input_schema": {"type": "object"}})), True),
    "the user's task": (changed(_set(("messages", 0, "content", 0, "text"), "Fix the bug!")),
                        True),
    "an earlier tool output": (changed(_set(("messages", 2, "content", 0, "content"), "ok")),
                               True),
    "an answer's call": (changed(_set(("messages", 1, "content", 1, "input"), {"c": 2})), True),
    "the latest tool output": (changed(_set(("messages", -1, "content", 0, "content"), "")),
                               False),
    "the latest answer's text": (changed(_set(("messages", -2, "content", 0, "text"), "x")),
                                 False),
    "a member of a block's order": (changed(lambda b: b["messages"][-1]["content"].__setitem__(
        0, dict(reversed(b["messages"][-1]["content"][0].items())))), False),
    "a system block as a string": (changed(_set(("system",), "You are a coding agent.")), True),
}


@pytest.mark.parametrize(("change", "before"), CHANGES.values(), ids=CHANGES.keys())
def test_any_change_of_what_the_cache_reads_changes_the_key(change, before):
    """And the previous key too when the previous request held it."""
    body = anthropic_body()
    other = change(body)
    assert json.dumps(other) != json.dumps(body)
    assert body_key(other).own != body_key(body).own
    assert (body_key(other).previous != body_key(body).previous) is before


@pytest.mark.parametrize("text", [
    ',"cache_control":{"type":"ephemeral"}',
    '{"cache_control":{"type":"ephemeral"}}',
    '{"cache_control":{"type":"ephemeral"},"a":1}',
    '\\",\\"cache_control\\":{\\"type\\":\\"ephemeral\\"}',
])
def test_a_text_that_looks_like_a_breakpoint_is_text(text):
    body = anthropic_body()
    plain = changed(_set(("messages", -1, "content", 0, "content"), "out"))(body)
    looking = changed(_set(("messages", -1, "content", 0, "content"), "out" + text))(body)
    assert body_key(looking).own != body_key(plain).own
    as_key = changed(_set(("messages", -1, "content", 0, "content"), [{"out" + text: 1}]))(body)
    assert body_key(as_key).own != body_key(
        changed(_set(("messages", -1, "content", 0, "content"), [{"out": 1}]))(body)).own


def test_an_integer_past_64_bits_is_keyed_too():
    """orjson does not write it: the key is made all the same, breakpoints
    left out as well."""
    items: list[object] = [{"role": "user", "content": [{"type": "text", "text": "n",
                                                          "n": 2**70}]}]
    marked_items = [{"role": "user", "content": [{"type": "text", "text": "n", "n": 2**70,
                                                  "cache_control": EPHEMERAL}]}]
    other = [{"role": "user", "content": [{"type": "text", "text": "n", "n": 2**70 + 1}]}]
    assert key_of({}, items) == key_of({}, marked_items) != key_of({}, other)


# Any JSON, breakpoints anywhere ----------------------------------------------------------

CONTROLS = st.sampled_from([EPHEMERAL, {"type": "ephemeral", "ttl": "1h"},
                            {"type": "ephemeral", "ttl": "5m"}])
names = st.text(max_size=12).filter(lambda name: name != "cache_control")
scalars = (st.none() | st.booleans() | st.integers() | st.text(max_size=30)
           | st.floats(allow_nan=False, allow_infinity=False))


@st.composite
def marked_pairs(draw: st.DrawFn, depth: int = 3) -> tuple[object, object]:
    """A JSON value, and the same value with breakpoints added to some of
    its objects (anywhere among their members)."""
    kind = draw(st.sampled_from(["scalar", "list", "object"] if depth else ["scalar"]))
    if kind == "scalar":
        value = draw(scalars)
        return value, value
    if kind == "list":
        pairs = draw(st.lists(marked_pairs(depth - 1), max_size=4))
        return [plain for plain, _ in pairs], [mark for _, mark in pairs]
    members = draw(st.dictionaries(names, marked_pairs(depth - 1), max_size=4))
    plain = {name: pair[0] for name, pair in members.items()}
    mark = {name: pair[1] for name, pair in members.items()}
    if draw(st.booleans()):
        at = draw(st.integers(0, len(mark)))
        entries = list(mark.items())
        entries.insert(at, ("cache_control", draw(CONTROLS)))
        mark = dict(entries)
    return plain, mark


@given(st.lists(marked_pairs(), min_size=1, max_size=6), marked_pairs(),
       st.lists(st.integers(0, 6), max_size=4))
def test_breakpoints_anywhere_in_any_json_change_neither_key(items, head, starts):
    plain_items, marked_items = [p for p, _ in items], [m for _, m in items]
    starts = sorted(set(starts))
    plain = history_key({"model": "m", "tools": head[0]}, plain_items, starts)
    with_breakpoints = history_key({"model": "m", "tools": head[1]}, marked_items, starts)
    assert with_breakpoints == plain


@given(st.lists(marked_pairs(), min_size=2, max_size=6), st.data())
def test_any_item_changed_changes_the_key(items, data):
    plain_items = [p for p, _ in items]
    at = data.draw(st.integers(0, len(plain_items) - 1))
    other = data.draw(scalars.filter(lambda value: value != plain_items[at]))
    other_items = [*plain_items[:at], other, *plain_items[at + 1:]]
    assert history_key({}, other_items, []).own != history_key({}, plain_items, []).own


# Going on from the previous request's digest ------------------------------------------

def test_an_item_orjson_cannot_write_changes_no_other_items_writing():
    """An integer past 64 bits is written by the json module, which writes
    some floats apart from orjson (``e-06``, ``e-6``): the items beside it
    are still written as orjson writes them, so the key gone on from a
    digest kept before the float is the key written whole."""
    items = [None, -(2 ** 63) - 1, 4.242986510205539e-06, None]
    members = {"model": "m"}
    _, kept = history_of(lambda: members, items[:2], [])
    whole, _ = history_of(lambda: members, items, [3])
    assert history_of(lambda: members, items, [3], kept)[0] == whole


@given(st.lists(marked_pairs(), min_size=1, max_size=8), marked_pairs(), st.data())
def test_a_key_gone_on_from_a_kept_digest_is_the_key_written_whole(items, head, data):
    """The next request writes only the items after the ones its previous
    request's digest went through (whatever breakpoints either carries;
    and its other members are not read, unless its own previous request
    ended before them and it is not the same request again): the keys,
    and the digest it keeps in turn, are the ones writing it whole
    gives."""
    plain_items, marked_items = [p for p, _ in items], [m for _, m in items]
    kept_count = data.draw(st.integers(0, len(items)))
    starts = sorted(set(data.draw(st.lists(st.integers(0, len(items)), max_size=4))))
    members = {"model": "m", "tools": head[0]}
    _, kept = history_of(lambda: members, plain_items[:kept_count],
                         [s for s in starts if s < kept_count])
    whole, whole_digest = history_of(lambda: members, marked_items, starts)
    latest = max([s for s in starts if s < len(items)], default=0)
    read: list[bool] = []

    def head() -> dict[str, object]:
        read.append(True)
        return members

    gone_on, digest = history_of(head, marked_items, starts, kept)
    assert bool(read) == (latest < kept_count < len(items))
    assert gone_on == whole
    assert digest.items == whole_digest.items == len(items)
    assert digest.state.hexdigest() == whole_digest.state.hexdigest()
    # The same request again (a retry) is the kept key, read from nothing.
    assert history_of(head, marked_items, starts, digest)[0] == whole
