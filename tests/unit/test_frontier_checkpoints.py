"""The frontier's checkpoints (``conversation/frontier/frontier.py``,
``conversation/frontier/checkpoints.py``): a request resumes the replay where the
conversation's previous request left it only when that is a state its own
replay goes through; otherwise it replays in full."""

from __future__ import annotations

from obsmask_core.conversation.frontier.checkpoints import Checkpoints, _weight, items_json
from obsmask_core.conversation.frontier.frontier import Frontier
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import CHAT
from support.formats import Call, Result, Turn, convert, session

POLICY = MaskPolicy(window_turns=1, price_model="anthropic", min_free_percent=0)


def frontier_of(items: list[object], resume=None, maskable=None) -> Frontier:
    index = CHAT.index(items)
    if maskable is None:
        maskable = {n: "[masked]" for n, r in enumerate(index.results)
                    if r.turn < len(index.turns) - POLICY.window_turns}
    return Frontier(index, items, POLICY, maskable, resume=resume)


def checkpoint_of(items: list[object], maskable=None):
    written = items_json(items)
    assert written is not None
    return frontier_of(items, maskable=maskable).checkpoint(written)


def test_the_next_request_of_a_conversation_resumes_and_agrees_with_a_full_replay(restores):
    earlier, later = convert(CHAT, session(turns=4)), convert(CHAT, session(turns=6))
    checkpoint = checkpoint_of(earlier)
    assert checkpoint.same_items(items_json(later) or b"")
    again = frontier_of(later, resume=checkpoint)
    assert restores == [checkpoint]
    full = frontier_of(later)
    assert again._replayed_to == len(later)
    assert (again.turn, again._masked_turns, again.chars_before, again.bill()) == (
        full.turn, full._masked_turns, full.chars_before, full.bill())


def test_a_checkpoint_whose_items_end_inside_a_model_answer_is_not_resumed_from(restores):
    """The items a checkpoint holds must end where a request of the
    conversation ends: just before one of the model's answers."""
    later = convert(CHAT, session(turns=6))
    # Cut after a tool's result, before the next result of the same turn
    # or the user's words: no request of the conversation ends there.
    ends = set(CHAT.index(later).answer_starts)
    cut = next(n for n in range(2, len(later)) if n not in ends)
    frontier = frontier_of(later, resume=checkpoint_of(later[:cut]))
    assert restores == []
    full = frontier_of(later)
    assert (frontier.turn, frontier.bill()) == (full.turn, full.bill())


def test_a_checkpoint_whose_savings_differ_is_not_resumed_from(restores):
    """An old result judged differently now (with recall, an id a later
    result reuses) changes what a move would have freed: replay in full."""
    earlier, later = convert(CHAT, session(turns=5)), convert(CHAT, session(turns=7))
    index = CHAT.index(earlier)
    other = {n: "[masked, and a longer placeholder]" for n, r in enumerate(index.results)
             if r.turn < len(index.turns) - 1}
    frontier_of(later, resume=checkpoint_of(earlier))
    assert len(restores) == 1
    frontier_of(later, resume=checkpoint_of(earlier, maskable=other))
    assert len(restores) == 1


def test_items_that_only_begin_alike_are_not_the_same_items():
    checkpoint = checkpoint_of([{"role": "user", "content": "go"},
                                {"role": "assistant", "content": "1"}])
    assert checkpoint.same_items(items_json([{"role": "user", "content": "go"},
                                             {"role": "assistant", "content": "1"}]) or b"")
    assert not checkpoint.same_items(items_json([{"role": "user", "content": "go"},
                                                 {"role": "assistant", "content": "12"}])
                                     or b"")
    assert not checkpoint.same_items(items_json([{"role": "user", "content": "go"}]) or b"")


def test_checkpoints_keep_the_longest_and_stay_within_their_bytes():
    kept = Checkpoints(bytes_kept=10_000)
    first = checkpoint_of(convert(CHAT, session(turns=2)))
    grown = checkpoint_of(convert(CHAT, session(turns=3)))
    kept.keep("c-1", first)
    kept.keep("c-1", grown)
    # The one it grew from is gone: the longest fitting one is found.
    assert kept.find("c-1", items_json(convert(CHAT, session(turns=4))) or b"") is grown
    assert kept._bytes == _weight(grown) > len(grown.items_json)
    kept.keep("c-2", checkpoint_of([{"role": "user", "content": "x" * 6_000}]))
    kept.keep("c-3", checkpoint_of([{"role": "user", "content": "y" * 6_000}]))
    # Over 10,000 bytes: the oldest conversations went.
    assert kept._bytes <= 10_000
    assert kept.find("c-1", items_json(convert(CHAT, session(turns=4))) or b"") is None


def test_unwritable_items_are_replayed_in_full():
    assert items_json([{"n": 2**70}]) is None
    assert items_json([Result("c", "x")]) is None
    assert items_json([Turn([Call("c")])]) is None


def test_a_number_too_big_for_a_float_is_never_taken_for_null():
    """The exact reader keeps 1e400 as written: as inf, orjson would write
    it as null, and a request holding it would pass for one holding null
    (in the Responses format, an item of type null starts a model answer;
    one of type 1e400 does not)."""
    from obsmask_core.conversation.masking.masker import Masker
    from obsmask_core.conversation.masking.rewrite import mask_request_body
    from obsmask_core.conversation.turns.wire_formats import RESPONSES

    policy = MaskPolicy(price_model="anthropic", window_turns=1)

    def body(kind: str, calls: int) -> bytes:
        items = ['{"role":"user","content":"go"}',
                 '{"type":' + kind + ',"role":"assistant","content":"hi"}',
                 '{"role":"user","content":"more"}']
        for n in range(calls):
            items.append(f'{{"type":"function_call","call_id":"c{n}","name":"bash",'
                         f'"arguments":"{{}}"}}')
            items.append(f'{{"type":"function_call_output","call_id":"c{n}",'
                         f'"output":"{"x" * 5000}"}}')
        return ('{"model":"m","input":[' + ",".join(items) + "]}").encode()

    masker = Masker(policy)
    masker.mask(body("null", 0), RESPONSES)
    after_null = masker.mask(body("1e400", 3), RESPONSES)
    alone = mask_request_body(body("1e400", 3), policy, RESPONSES)
    assert after_null.plan is not None and alone.plan is not None
    assert after_null.plan.bill == alone.plan.bill
    assert items_json([{"n": float("inf")}]) == b'[{"n":null}]'  # why it matters
