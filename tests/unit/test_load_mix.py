"""The load benchmark's mix: its conversation bodies as agents send them,
fresh, or repeated; each still a request of the sessions it comes from;
Claude Code's requests as it writes them; and the figures of one shape of
traffic at a time."""

from __future__ import annotations

import gzip
import json

import pytest

from benchlib.load.agents import Conversation, first_item
from benchlib.load.bodies import Bodies, build_bodies
from benchlib.load.cases import Tally
from benchlib.load.claude_code import ClaudeCodeConversation
from benchlib.load.mix import AGENTS, FRESH, MIX, SHAPE_KINDS, Mix
from benchlib.load.shapes import ReuseCount, replay_reuse, shape_report, versus_report
from benchlib.load.speed import LoadFigures
from obsmask_core.offline.cache.clients import ClientRequests
from obsmask_core.offline.cache.sessions import Session
from obsmask_core.offline.proxy_settings import settings_in_force
from support.processes import REPO

CONVERSATION_KINDS = [kind for kind in MIX if not kind.startswith(("mcp", "bad"))]
GROUPS = {"chat-1.5mb": "chat_large", "claude-code": "claude_code",
          "claude-code-sse": "claude_code"}
MARK = b',"cache_control":{"type":"ephemeral"}'
CLIENTS, PER_CLIENT = 3, 2 * len(MIX)


@pytest.fixture(scope="module")
def bodies() -> Bodies:
    return build_bodies(REPO / "fixtures" / "sessions")


def decoded(body: bytes, headers: dict[str, str]) -> bytes:
    return gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body


def sent(mix: Mix, rounds: int = 2) -> list[tuple[int, str, bytes]]:
    """(client, kind, decoded body) of every conversation request, numbered
    as the load's clients number them."""
    out = []
    for round_number in range(rounds):
        for client in range(CLIENTS):
            for i in range(PER_CLIENT):
                n = (round_number * CLIENTS + client) * PER_CLIENT + i
                request = mix.request(n, client + i)
                if request.kind in CONVERSATION_KINDS:
                    out.append((client, request.kind, decoded(request.body, request.headers)))
    return out


def test_fresh_bodies_are_never_sent_twice_and_hold_the_same_request(bodies):
    repeated, fresh = Mix(bodies, cuts=True), Mix(bodies, cuts=True, mode=FRESH)
    seen: set[bytes] = set()
    for n in range(3 * len(MIX)):
        for kind in CONVERSATION_KINDS:
            old, new = repeated.of_kind(kind, n), fresh.of_kind(kind, n)
            old_body, new_body = decoded(old.body, old.headers), decoded(new.body, new.headers)
            assert new_body not in seen
            seen.add(new_body)
            document = json.loads(new_body)
            assert isinstance(document.pop("bench_request"), int)
            assert document == json.loads(old_body)
            assert (new.path, new.headers, new.expected) == (old.path, old.headers, old.expected)


def test_repeated_bodies_repeat(bodies):
    mix = Mix(bodies, cuts=True)
    assert mix.of_kind("anthropic", 0).body == mix.of_kind("anthropic", len(bodies.anthropic)).body


def test_an_agents_next_request_only_adds_to_its_last_and_no_two_agents_send_the_same(bodies):
    """Each client's conversation of a kind grows request by request (the
    bytes before the list's end stay, the bytes after it too), or starts
    again from its first request after its last; no body is sent twice."""
    mix = Mix(bodies, cuts=True, mode=AGENTS, clients=CLIENTS, per_client=PER_CLIENT)
    assert mix.agents is not None
    last: dict[tuple[int, str], bytes] = {}
    seen: set[bytes] = set()
    grew = 0
    for client, kind, body in sent(mix):
        assert body not in seen
        seen.add(body)
        before = last.get((client, kind))
        last[client, kind] = body
        if before is None:
            continue
        group = GROUPS.get(kind, kind.split("-")[0])
        if group == "claude_code":
            # Claude Code moves its breakpoint on: the next request grows
            # from the one before without it.
            at = before.rfind(MARK)
            before, tail = before[:at] + before[at + len(MARK):], b"]}"
        else:
            conversations = mix.agents.conversations[group]
            tail = conversations[client % len(conversations)].tail
        close = len(before) - len(tail)
        if body.startswith(before[:close]) and body.endswith(tail) and len(body) > len(before):
            grew += 1
        else:  # begun again
            assert len(body) < len(before)
    assert grew >= len(seen) - 2 * len(last)


def test_an_agents_request_is_a_request_of_its_session_with_its_own_first_message(bodies):
    session = bodies.anthropic[0]
    conversation = Conversation.of(session, "messages")
    whole = json.loads(session)
    for step in range(len(conversation.ends)):
        document = json.loads(conversation.request(step, first_item(4, "anthropic")))
        messages = document.pop("messages")
        assert messages[0] == {"role": "user", "content": "bench agent 4, anthropic"}
        assert messages[1:] == whole["messages"][:conversation.ends[step]]
        assert document == {k: v for k, v in whole.items() if k != "messages"}
        # A request ends before one of the model's answers, or holds them all.
        following = whole["messages"][conversation.ends[step]:]
        assert not following or following[0]["role"] == "assistant"


def test_one_clients_next_request_only_adds_to_the_one_before_and_is_never_sent_twice(bodies):
    mix = Mix(bodies, cuts=True, mode=AGENTS)
    tail = Conversation.of(bodies.chat_sized["100 KB"], "messages").tail
    seen: set[bytes] = set()
    for _ in range(20):
        previous, following = mix.next_request_pair("100 KB")
        assert previous not in seen and following not in seen
        seen.update((previous, following))
        close = len(previous) - len(tail)
        assert following.startswith(previous[:close]) and following.endswith(tail)
        assert len(following) > len(previous)
        assert 0.7 * 100_000 < len(following) <= len(bodies.chat_sized["100 KB"]) + 100


def test_a_claude_code_agent_sends_each_request_as_claude_code_with_its_own_first_message(
        bodies):
    """Each request as ``ClientRequests`` writes it (the breakpoint on its
    own last block, the two marked system blocks, Claude Code's tools),
    after the agent's own user message."""
    session = bodies.claude_code_sessions[0]
    conversation = ClaudeCodeConversation(session)
    assert conversation.ends == tuple(end + 1 for end in session.request_ends)
    first = first_item(3, "claude_code")
    client = ClientRequests(Session(session.name, session.kind,
                                    [json.loads(first), *session.messages],
                                    fmt=session.fmt, preamble=session.preamble,
                                    members=session.members))
    for step in range(len(conversation.ends)):
        body = conversation.request(step, first)
        assert body == client.request(conversation.ends[step]).body
        document = json.loads(body)
        messages = document["messages"]
        assert messages[0] == {"role": "user", "content": "bench agent 3, claude_code"}
        assert messages[1:-1] == session.messages[:len(messages) - 2]
        assert messages[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        assert len(document["tools"]) == 12
        assert all("cache_control" in block for block in document["system"])
    other = conversation.request(0, first_item(4, "claude_code"))
    assert other != conversation.request(0, first)
    assert bodies.claude_code[0] == ClientRequests(session).request(
        session.request_ends[-1]).body
    assert bodies.sessions["claude_code"] == len(bodies.claude_code) == 10


def test_a_shape_alone_sends_its_kinds_in_turn(bodies):
    mix = Mix(bodies, cuts=True, mode=FRESH)
    kinds = list(SHAPE_KINDS["claude_code"])
    sent_kinds = [mix.request(n, n, kinds).kind for n in range(4)]
    assert sent_kinds == ["claude-code", "claude-code-sse"] * 2
    assert {"claude-code", "claude-code-sse"} <= set(MIX)
    request = mix.request(0, 0, kinds)
    assert request.path.startswith("/v1/messages?")
    assert json.loads(request.body)["tools"] == json.loads(bodies.claude_code[0])["tools"]


def _figures(requests: int, seconds: float, cpu: float) -> LoadFigures:
    figures = LoadFigures()
    figures.add({"claude-code": Tally(requests=requests, seconds=[0.01] * requests)}, seconds,
                cpu, 1.0)
    return figures


def test_each_shape_is_reported_with_its_ratios_and_targets():
    report = shape_report(
        {"claude_code": {"plain": _figures(100, 1.0, 0.5), "obsmask": _figures(100, 2.5, 1.5)}},
        {"claude_code": ReuseCount(16, {"Masked": 10, "Unchanged": 6}, 4, 32.0, 8.0)})
    shape = report["claude_code"]
    assert shape["kinds"] == ["claude-code", "claude-code-sse"]
    assert shape["plain"]["cpu_ms_per_request"] == 5.0
    assert shape["obsmask"]["requests_per_s"] == 40.0
    assert shape["ratios"] == {"cpu_per_request": 3.0, "requests_per_s": 0.4}
    assert {name: t["met"] for name, t in shape["targets"].items()} == {
        "cpu_per_request_obsmask_over_plain": False, "requests_per_s_obsmask_over_plain": False}
    assert (shape["targets_met"], shape["targets_total"]) == (0, 2)
    assert shape["reuse_replayed"] == {
        "requests": 16, "outcomes": {"Masked": 10, "Unchanged": 6}, "masked": 10, "reused": 4,
        "reused_of_masked": 0.4, "mask_ms_per_request": 2.0, "mask_over_orjson": 4.0}


def test_obsmask_against_another_checkout_is_reported_over_plain_and_over_each_other():
    report = versus_report({"chat": {"plain": _figures(100, 1.0, 0.5),
                                     "obsmask": _figures(100, 2.0, 1.0),
                                     "versus": _figures(100, 2.5, 1.25)}})
    chat = report["chat"]
    assert [chat[name]["cpu_ms_per_request"] for name in ("plain", "obsmask", "versus")] == [
        5.0, 10.0, 12.5]
    assert chat["ratios"] == {
        "obsmask_over_plain": {"cpu_per_request": 2.0, "requests_per_s": 0.5},
        "versus_over_plain": {"cpu_per_request": 2.5, "requests_per_s": 0.4},
        "obsmask_over_versus": {"cpu_per_request": 0.8, "requests_per_s": 1.25}}


def test_a_shapes_traffic_masked_in_process_counts_its_outcomes(bodies):
    policy = settings_in_force([], config=str(REPO / "mitm.toml")).policy
    counts = replay_reuse(bodies, FRESH, ["claude_code"], clients=2, per_client=3,
                          policy=policy)
    count = counts["claude_code"]
    assert count.requests == 6 == sum(count.outcomes.values())
    assert count.outcomes.get("Masked", 0) > 0
    assert count.reused == 0  # every fresh body is one obsmask has not seen
    assert count.mask_ms > 0 and count.orjson_ms > 0
