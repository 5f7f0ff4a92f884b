"""Grouping the recorded requests into conversations
(``scripts/benchlib/measure/conversations.py``): a request that another
continues belongs to its conversation, whatever the order of the flows;
a file of two conversations gives two; a retry is one request; each
recorded request is paired with the replayed request of its length."""

from __future__ import annotations

from obsmask_core.conversation.planning.holdout import conversation_id
from obsmask_core.conversation.turns.wire_formats import CHAT, RESPONSES
from obsmask_core.offline.measure.conversations import group_conversations
from obsmask_core.offline.measure.inputs import SentRequest
from support.chat import conversation, user


def _sent(items: list[object], flow: int, fmt=CHAT) -> SentRequest:
    return SentRequest("flows.mitm", flow, (items, None, fmt))


def _requests_of(messages: list[object]) -> list[list[object]]:
    """What the agent sent: the list up to each assistant message, and all of it."""
    ends = [n for n, m in enumerate(messages) if isinstance(m, dict)
            and m.get("role") == "assistant"]
    return [messages[:end] for end in ends] + [messages]


def test_the_requests_of_one_conversation_give_one_replayed_from_the_longest():
    messages = conversation(4)
    sent = [_sent(items, n) for n, items in enumerate(_requests_of(messages), start=1)]
    shuffled = [sent[2], sent[0], sent[4], sent[1], sent[3]]  # flows written out of order
    [found] = group_conversations(shuffled)
    assert found.session.messages == messages and found.last is sent[4]
    assert found.requests == shuffled
    assert found.name == conversation_id(messages)
    assert len(found.session.request_ends) == 5


def test_two_conversations_in_one_file_give_two():
    first, second = conversation(3), conversation(2)
    second[1] = user("Another task.")
    sent = [_sent(first[:3], 1), _sent(second[:3], 2), _sent(first, 3), _sent(second, 4)]
    found = group_conversations(sent)
    assert [c.session.messages for c in found] == [first, second]
    assert [[r.flow for r in c.requests] for c in found] == [[1, 3], [2, 4]]
    assert [c.number for c in found] == [1, 2]


def test_a_retried_request_is_one_request_of_its_conversation():
    messages = conversation(2)
    [found] = group_conversations([_sent(messages, 1), _sent(messages, 2)])
    assert found.last.flow == 2 and len(found.requests) == 2


def test_the_same_list_in_another_format_is_another_conversation():
    messages = conversation(2)
    found = group_conversations([_sent(messages, 1), _sent(messages, 2, RESPONSES)])
    assert len(found) == 2


def test_each_recorded_request_is_paired_with_the_replayed_request_of_its_length():
    messages = conversation(4)
    sent = [_sent(items, n) for n, items in enumerate(_requests_of(messages), start=1)]
    odd = _sent(messages[:3], 9)  # ends with an answer of the model: no request of the replay
    [found] = group_conversations([*sent, odd])
    assert [found.replay_index(request) for request in sent] == [0, 1, 2, 3, 4]
    assert found.replay_index(odd) is None


def test_a_moved_cache_breakpoint_does_not_split_a_conversation():
    """Claude Code marks the last block of each request with cache_control:
    the same message carries it in one request and not in the next."""
    messages = conversation(3)
    marked = [*messages[:4], {**messages[4], "cache_control": {"type": "ephemeral"}}]
    other = [*messages[:4], {**messages[4], "content": "another result"}]
    [found] = group_conversations([_sent(marked, 1), _sent(messages, 2)])
    assert found.last.flow == 2 and len(found.requests) == 2
    assert len(group_conversations([_sent(other, 1), _sent(messages, 2)])) == 2
