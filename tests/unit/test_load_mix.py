"""The load benchmark's mix: its conversation bodies as agents send them,
fresh, or repeated; each still a request of the sessions it comes from."""

from __future__ import annotations

import gzip
import json

import pytest

from benchlib.load.agents import Conversation, first_item
from benchlib.load.bodies import Bodies, build_bodies
from benchlib.load.mix import AGENTS, FRESH, MIX, Mix
from support.processes import REPO

CONVERSATION_KINDS = [kind for kind in MIX if not kind.startswith(("mcp", "bad"))]
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
        group = ("chat_large" if kind == "chat-1.5mb" else kind.split("-")[0])
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
