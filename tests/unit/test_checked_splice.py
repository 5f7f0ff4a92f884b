"""The check of a masked body proves where the body's other results sit,
without changing a byte of what goes out: the sentinels stand in only in
the body that is checked, and a proof that fails leaves the body to the
plain check."""

from __future__ import annotations

import orjson

from obsmask_core.conversation.body.quick_body import QuickBody
from obsmask_core.conversation.body.request_body import Replacement
from obsmask_core.conversation.masking.checked_splice import Checked, splice_and_check
from obsmask_core.conversation.planning.plan import MaskDecision, MaskPlan
from obsmask_core.conversation.reuse.proven_spans import candidates, unproven
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT


def chat_body(outputs: list[str]) -> bytes:
    messages: list[object] = [{"role": "user", "content": "go"}]
    for number, output in enumerate(outputs):
        call_id = f"call_{number}"
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": output}]
    return orjson.dumps({"model": "m", "messages": messages})


def mask_first(body: bytes, fmt=CHAT) -> tuple[QuickBody, list[Replacement], MaskPlan]:
    read = QuickBody.read(body, fmt.list_member)
    assert read is not None
    first = fmt.index(read.items).results[0]
    path = fmt.value_path(first.location)
    edit = Replacement(first.location[0], path, first.content, "[masked]",
                       anchor=first.call_id)
    plan = MaskPlan(decisions=[MaskDecision(first.location, first.call_id, "bash",
                                            str(first.content), first.content, "[masked]")])
    return read, [edit], plan


def test_the_check_proves_every_other_result_and_sends_only_the_planned_change():
    body = chat_body(["one, \"1\"", "two ]", "one, \"1\""])
    read, edits, plan = mask_first(body)
    probes = unproven(candidates(read.items, 0, CHAT.index(read.items), CHAT), edits, {})
    assert [place for place, _, _ in probes] == [(4, ("content",)), (6, ("content",))]
    checked = splice_and_check(read, edits, plan, CHAT, body.rindex(b"]"), probes)
    assert isinstance(checked, Checked)
    assert checked.body == QuickBody.replace_in(body, edits)
    assert b"obsmask-proof" not in checked.body
    assert set(checked.proven) == {(2, ("content",)), (4, ("content",)), (6, ("content",))}
    for (index, path), (start, end) in checked.proven.items():
        assert orjson.loads(body[start:end]) == read.items[index][path[0]]


def test_a_proof_that_lands_in_the_wrong_place_leaves_the_body_to_the_plain_check():
    """The input of the block that closes a turn's calls is written earlier
    in the same item, and nothing anchors it: its sentinel reads in the
    wrong block, so the proof is dropped and the planned change alone is
    checked and sent."""
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"c": 1}},
            {"type": "tool_use", "id": "t2", "name": "bash", "input": {"c": 1}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "long output"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "other output"}]},
    ]
    body = orjson.dumps({"model": "m", "messages": messages})
    read, edits, plan = mask_first(body, ANTHROPIC)
    probes = unproven(candidates(read.items, 0, ANTHROPIC.index(read.items), ANTHROPIC),
                      edits, {})
    assert [place for place, _, _ in probes] == [(1, ("content", 1, "input")),
                                                  (2, ("content", 1, "content"))]
    checked = splice_and_check(read, edits, plan, ANTHROPIC, body.rindex(b"]"), probes)
    assert isinstance(checked, Checked)
    assert checked.body == QuickBody.replace_in(body, edits)
    assert set(checked.proven) == {(2, ("content", 0, "content"))}
