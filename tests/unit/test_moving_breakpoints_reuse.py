"""Claude Code's requests reuse the previous request's work like any other
client's (``conversation/frontier/checkpoints.py``, ``conversation/billing/unmarked.py``).
Claude Code moves its message breakpoint to the newest block on every
request (and may end a request with a ``role: "system"`` reminder that
carries it, or send a top-level ``cache_control``): the history compared
across requests leaves ``cache_control`` out, so each request resumes the
frontier's replay from the previous request's checkpoint, and plans exactly
what a replay from scratch plans; and the body is read from the previous
request's (the fast path finds it grew from it once its moved breakpoint
is taken out)."""

from __future__ import annotations

import itertools
import json

import pytest

from obsmask_core.conversation.billing.breakpoints import grown_layout, read_layout
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import Masked, RewriteOutcome, Unchanged
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.reuse import previous_requests, records
from obsmask_core.conversation.reuse.grown_body import GrownItems
from obsmask_core.conversation.reuse.previous_requests import PreviousRequests
from obsmask_core.conversation.reuse.records import Grown, PreviousRequest
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from support.formats import Call, Event, Result, Say, Turn, claude_code_body, convert

POLICY = MaskPolicy(window_turns=1, min_free_percent=20, price_model="auto",
                    allowance_percent=2, frontier_breakpoint=True)
REMINDER = {"role": "system", "content": [
    {"type": "text", "text": "<system-reminder>Todo list unchanged.</system-reminder>"}]}


def events(turns: int) -> list[Event]:
    out: list[Event] = [Say("user", "u" * 6000)]
    for turn in range(turns):
        out += [Turn([Call(f"c{turn}", "Bash")], text="t" * 300),
                Result(f"c{turn}", f"{turn} " + "o" * (2000 + 700 * (turn % 4)))]
    return out


def bodies(shape: str, turns: int = 14) -> list[bytes]:
    """Each request of one conversation as Claude Code sends it: the moving
    breakpoint on the last block, with ``reminders`` a system message
    after every third turn's results (staying in the history), with
    ``automatic`` a top-level cache_control instead."""
    out = []
    for turn in range(1, turns + 1):
        items = convert(ANTHROPIC, events(turn))
        if shape == "reminders":
            for at in range(len(items) - 1, 0, -1):
                if at % 6 == 0:
                    items.insert(at + 1, json.loads(json.dumps(REMINDER)))
        members = claude_code_body(items, model="claude-opus-5-5")
        if shape == "automatic":
            members["messages"] = items
            members["cache_control"] = {"type": "ephemeral"}
        written = json.dumps(members)
        if shape == "hour":  # Claude Code's promptCacheTtl of an hour
            written = written.replace('"cache_control": {"type": "ephemeral"}',
                                      '"cache_control": {"type": "ephemeral", "ttl": "1h"}')
        out.append(written.encode())
    return out


@pytest.fixture
def grown(monkeypatch: pytest.MonkeyPatch) -> list[Grown | None]:
    """What the fast path found each body grew from."""
    found: list[Grown | None] = []
    original = PreviousRequests.grown_from

    def spy(self: PreviousRequests, *args: object) -> Grown | None:
        result = original(self, *args)  # type: ignore[arg-type]
        found.append(result)
        return result

    monkeypatch.setattr(PreviousRequests, "grown_from", spy)
    return found


@pytest.mark.parametrize("shape", ["moving", "reminders", "automatic", "hour"])
def test_every_request_resumes_from_the_previous_one_and_plans_what_a_fresh_replay_plans(
    shape: str, restores: list[object], grown: list[Grown | None],
) -> None:
    sent = bodies(shape)
    kept = Masker(POLICY)
    outcomes: list[RewriteOutcome] = []
    for number, body in enumerate(sent):
        before = len(restores)
        outcomes.append(kept.mask(body, ANTHROPIC))
        if number:
            assert len(restores) == before + 1, (shape, number)
            assert grown[-1] is not None, (shape, number)
    del grown[:]
    for body, outcome in zip(sent, outcomes, strict=True):
        fresh = Masker(POLICY).mask(body, ANTHROPIC)
        assert (type(fresh), getattr(fresh, "body", None), fresh.plan) == (
            type(outcome), getattr(outcome, "body", None), outcome.plan)
    assert any(outcome.plan is not None and outcome.plan.masked for outcome in outcomes)


@pytest.mark.parametrize("shape", ["moving", "reminders", "automatic", "hour"])
def test_a_grown_requests_breakpoints_are_the_kept_ones_and_the_added_items(shape: str) -> None:
    """The layout of a request grown from the previous one is the previous
    request's (its closing breakpoint dropped when the client moved it on)
    and its added items': what reading every item finds."""
    sent = [json.loads(body) for body in bodies(shape)]
    for before, after in itertools.pairwise(sent):
        kept = read_layout(before, before["messages"])
        count = len(before["messages"])
        dropped = before["messages"][-1] != after["messages"][count - 1]
        grown = grown_layout(kept, after["messages"][count:], dropped)
        assert grown == read_layout(after, after["messages"]), shape


def test_an_hour_long_breakpoint_anywhere_among_the_messages_outlives_a_short_pause():
    """An entry of an hour on an early message outlives a 5-minute pause: a
    move behind it would re-bill a prefix the provider still reads."""
    items = convert(ANTHROPIC, events(3))
    early = items[0]
    assert isinstance(early, dict) and isinstance(early["content"], list)
    early["content"][-1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    members = claude_code_body(items)
    layout = read_layout(members, members["messages"])
    assert layout.outlives_five_minutes and layout.control == {"type": "ephemeral"}
    del early["content"][-1]["cache_control"]
    assert not read_layout(members, members["messages"]).outlives_five_minutes


def test_a_kept_request_of_another_conversation_with_the_same_start_is_not_copied(
        monkeypatch: pytest.MonkeyPatch, grown: list[Grown | None]) -> None:
    """Two Claude Code conversations share their first bytes (the same
    tools and system): each request grows from its own conversation's kept
    request, and the other's is never copied without its breakpoint (its
    bytes before the breakpoint are not the body's)."""
    def conversation(letter: str) -> list[bytes]:
        out = []
        for turn in range(1, 7):
            items = convert(ANTHROPIC, [Say("user", letter * 6000), *events(turn)[1:]])
            out.append(json.dumps(claude_code_body(items, model="claude-opus-5-5")).encode())
        return out

    views: list[PreviousRequest] = []
    original = previous_requests.unmarked_request

    def spy(kept: PreviousRequest, body: bytes) -> tuple[PreviousRequest, int] | None:
        unmarked = original(kept, body)
        if unmarked is not None:
            views.append(kept)
        return unmarked

    monkeypatch.setattr(previous_requests, "unmarked_request", spy)
    masker = Masker(POLICY)
    first, second = conversation("u"), conversation("v")
    assert first[0][:256] == second[0][:256]
    for mine, theirs in zip(first, second, strict=True):
        for body in (mine, theirs):
            made = len(views)
            masker.mask(body, ANTHROPIC)
            found = grown[-1]
            assert len(views) - made == (found is not None)
            if found is not None:
                assert views[-1] is found.kept
                assert body.startswith(found.previous.body[:found.previous.end])


def test_a_kept_requests_breakpoint_is_looked_for_once_however_many_conversations_share_its_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With many Claude Code conversations going on, every request is
    compared with the kept request of each (they all begin with the same
    tools): the moved breakpoint of a kept request is found once, when it
    is first compared, not once for every request of every conversation."""
    searched: dict[bytes, int] = {}  # by the bytes searched: ids may be reused
    original = records.closing_mark

    def spy(written: bytes, end: int) -> tuple[int, int] | None:
        searched[written] = searched.get(written, 0) + 1
        return original(written, end)

    monkeypatch.setattr(records, "closing_mark", spy)
    conversations = [[json.dumps(claude_code_body(
        convert(ANTHROPIC, [Say("user", letter * 6000), *events(turn)[1:]]),
        model="claude-opus-5-5")).encode() for turn in range(1, 6)] for letter in "uvwxy"]
    masker = Masker(POLICY)
    outcomes = [masker.mask(body, ANTHROPIC)
                for step in zip(*conversations, strict=True) for body in step]
    assert all(isinstance(outcome, Masked | Unchanged) for outcome in outcomes)
    assert len(searched) >= 4 * 5  # every kept request but each conversation's last
    assert max(searched.values()) == 1


def test_where_the_frontier_breakpoint_goes_is_known_without_reading_the_older_items(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With many conversations going on, no parsed body is kept from one
    request to the next. A Claude Code request that grew from its previous
    one, and goes out as that request's masked body with its added items,
    is still read from its added items alone: the block the frontier
    breakpoint goes on, and the client's breakpoint it copies, are known
    without reading the older items again."""
    monkeypatch.setattr(previous_requests, "DOCUMENT_CONVERSATIONS", 0)
    reads: list[int] = []
    original = GrownItems.read_document

    def spy(self: GrownItems) -> dict[str, object]:
        if self.document is None:
            reads.append(len(self))
        return original(self)

    monkeypatch.setattr(GrownItems, "read_document", spy)
    masker = Masker(POLICY)
    read_whole: list[bool] = []
    for body in bodies("moving"):
        before = len(reads)
        outcome = masker.mask(body, ANTHROPIC)
        if isinstance(outcome, Masked) and outcome.reused:
            assert outcome.plan.breakpoint is not None
            read_whole.append(len(reads) > before)
    assert len(read_whole) >= 5
    assert not any(read_whole)


def test_a_cache_control_of_a_message_itself_is_not_taken_for_the_moved_breakpoint() -> None:
    """A client that marks every user message's last block and puts a
    ``cache_control`` on its latest message itself (the API refuses both:
    too many breakpoints, and a member no message has): the member of the
    message is no breakpoint on a block, so the kept request is not taken
    for this one's once it is cut out, and a masker that keeps its work
    masks each request as one that keeps nothing."""
    requests = []
    for turn in range(1, 11):
        items = convert(ANTHROPIC, events(turn))
        for item in items:
            if item["role"] == "user":
                if isinstance(item["content"], str):
                    item["content"] = [{"type": "text", "text": item["content"]}]
                item["content"][-1]["cache_control"] = {"type": "ephemeral"}
        items[-1]["cache_control"] = {"type": "ephemeral"}
        requests.append(json.dumps({"model": "claude-opus-5-5", "max_tokens": 1024,
                                    "messages": items}).encode())
    kept = Masker(POLICY)
    for body in requests:
        outcome = kept.mask(body, ANTHROPIC)
        alone = mask_request_body(body, POLICY, ANTHROPIC)
        assert (type(alone), getattr(alone, "body", None), alone.plan) == (
            type(outcome), getattr(outcome, "body", None), outcome.plan)


def _with_marks(body: bytes, shape: str) -> bytes:
    """``body`` with a breakpoint the layout does not count on the last
    block of every answer (``null``), or with one it does on the message
    before the last, in place of one of the system's (``earlier``: the
    first after the frontier's item is then not the last message's)."""
    members = json.loads(body)
    messages = members["messages"]
    if shape == "null":
        for message in messages:
            if message["role"] == "assistant":
                message["content"][-1]["cache_control"] = None
    elif len(messages) > 2:
        for block in [block for block in members["system"] if "cache_control" in block][:1]:
            del block["cache_control"]
        messages[-2]["content"][-1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    return json.dumps(members).encode()


@pytest.mark.parametrize("shape", ["moving", "reminders", "automatic", "null", "earlier"])
def test_the_frontier_breakpoint_planned_from_kept_work_is_the_one_reading_every_item_plans(
        shape: str) -> None:
    """A masker that keeps its work tells where the frontier breakpoint goes
    from the items as measured and the client's breakpoints as counted
    (``_only_mark_closes``); a request masked with nothing kept reads every
    item. Both plan the same breakpoint, or none: a block that carries a
    ``cache_control`` of any value never gets a second one."""
    sent = [_with_marks(body, shape) if shape in ("null", "earlier") else body
            for body in bodies("moving" if shape in ("null", "earlier") else shape)]
    kept = Masker(POLICY)
    placed = 0
    for body in sent:
        outcome = kept.mask(body, ANTHROPIC)
        alone = mask_request_body(body, POLICY, ANTHROPIC)
        assert (type(alone), getattr(alone, "body", None), alone.plan) == (
            type(outcome), getattr(outcome, "body", None), outcome.plan), shape
        placed += outcome.plan is not None and outcome.plan.breakpoint is not None
    assert (placed > 0) == (shape != "null")
