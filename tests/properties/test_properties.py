"""Property-based tests on Chat Completions bodies: the invariants of masking
and the window rule on arbitrary conversations (parallel calls, reused ids,
orphans, multimodal content, missing and malformed fields), the byte-level
rewrite of whole bodies, and the span parser against json.loads."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmask_core.conversation.body.request_text import loads, parse_request
from obsmask_core.conversation.masking.rewrite import mask_request_body
from obsmask_core.conversation.planning.error_heuristic import looks_like_error
from obsmask_core.conversation.settings.policy import MaskPolicy, render_placeholder
from support.chat import LONG_OUTPUT
from support.chat_masking import check_chat_invariants, mask_old_tool_results

IDS = ["call_a", "call_b", "call_c", "call_d", "", "x"]
NAMES = ["bash", "read_file", None]

texts = st.one_of(
    st.sampled_from(
        [
            "ok",
            LONG_OUTPUT,
            "Traceback (most recent call last):\n  x\nValueError: boom\n" + "y" * 200,
            json.dumps({"error": "bad", "pad": "z" * 200}),
            json.dumps({"error": None, "pad": "z" * 200}),
            "[Observation masquée: résultat d'outil ancien (tool_call_id=call_a, outil=bash, "
            "chars=999)]",
        ]
    ),
    st.text(max_size=300),
)
contents = st.one_of(
    texts,
    st.none(),
    st.integers(),
    st.lists(
        st.fixed_dictionaries({"type": st.just("text"), "text": texts}), max_size=2
    ),
    st.lists(
        st.fixed_dictionaries(
            {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": st.text()})}
        ),
        max_size=1,
    ),
)


@st.composite
def tool_calls(draw: st.DrawFn) -> object:
    def call() -> object:
        entry: dict[str, object] = {"type": "function"}
        call_id = draw(st.one_of(st.sampled_from(IDS), st.none(), st.integers()))
        if draw(st.booleans()) or call_id is not None:
            entry["id"] = call_id
        name = draw(st.sampled_from(NAMES))
        if name is not None:
            entry["function"] = {"name": name, "arguments": "{}"}
        return entry

    shape = draw(st.integers(0, 9))
    if shape == 0:
        return None
    if shape == 1:
        return "not a list"
    return [call() for _ in range(draw(st.integers(0, 3)))] + draw(
        st.lists(st.sampled_from([1, "s", None]), max_size=1)
    )


@st.composite
def messages(draw: st.DrawFn) -> list[object]:
    out: list[object] = []
    for _ in range(draw(st.integers(0, 24))):
        kind = draw(st.sampled_from(["assistant", "tool", "tool", "user", "system", "junk"]))
        if kind == "assistant":
            message: dict[str, object] = {"role": "assistant", "content": draw(contents)}
            calls = draw(tool_calls())
            if calls is not None:
                message["tool_calls"] = calls
            out.append(message)
        elif kind == "tool":
            message = {"role": "tool"}
            if draw(st.integers(0, 5)):
                message["tool_call_id"] = draw(
                    st.one_of(st.sampled_from(IDS), st.none(), st.integers())
                )
            if draw(st.integers(0, 7)):
                message["content"] = draw(contents)
            out.append(message)
        elif kind == "junk":
            out.append(draw(st.one_of(st.integers(), st.text(max_size=5), st.none())))
        else:
            out.append({"role": kind, "content": draw(contents)})
    return out


policies = st.builds(
    MaskPolicy,
    refetch_guard=st.booleans(),
    enabled=st.booleans(),
    window_turns=st.integers(0, 4),
    keep_errors=st.booleans(),
    keep_last_k_per_tool=st.integers(0, 2),
)


def expected_by_reference(conversation: list[object], policy: MaskPolicy) -> list[object]:
    """The window rule written out plainly, message by message, with backward
    scans instead of the implementation's index: a result of a turn older
    than the last ``window_turns`` tool turns is masked, unless it is an
    orphan, not text, already masked, an error (with keep_errors), one of
    the last K of its tool, or longer as a placeholder.

    The last K of a tool are counted in the request that ended just before
    the model's first answer after the last tool turn (where the window
    last moved), so that what was sent stays as it was until the window
    moves again; a result placed after that request is more recent than
    all of them and is kept as well."""

    def is_turn(m: object) -> bool:
        return (
            isinstance(m, dict)
            and m.get("role") == "assistant"
            and isinstance(m.get("tool_calls"), list)
            and any(
                isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"]
                for c in m["tool_calls"]
            )
        )

    turn_positions = [i for i, m in enumerate(conversation) if is_turn(m)]

    def link(i: int) -> tuple[int, str | None] | None:
        """(turn number, tool name) of the latest turn before i declaring the id."""
        call_id = conversation[i]["tool_call_id"]
        for number in range(len(turn_positions) - 1, -1, -1):
            position = turn_positions[number]
            if position > i:
                continue
            for c in reversed(conversation[position]["tool_calls"]):
                if isinstance(c, dict) and c.get("id") == call_id:
                    f = c.get("function")
                    name = f.get("name") if isinstance(f, dict) else None
                    return number, name if isinstance(name, str) and name else None
        return None

    results = [
        i
        for i, m in enumerate(conversation)
        if isinstance(m, dict)
        and m.get("role") == "tool"
        and isinstance(m.get("tool_call_id"), str)
        and m["tool_call_id"]
        and link(i) is not None
    ]
    out = list(conversation)
    if not policy.enabled or policy.window_turns <= 0:
        return out
    k = policy.keep_last_k_per_tool or 0
    counted_end = len(conversation)
    if len(turn_positions) > policy.window_turns:
        counted_end = next(
            (
                i
                for i in range(turn_positions[-1] + 1, len(conversation))
                if isinstance(conversation[i], dict) and conversation[i].get("role") == "assistant"
            ),
            len(conversation),
        )
    kept_by_k = set()
    for i in results:
        name = link(i)[1]
        later_same_tool = [
            j for j in results if i <= j < counted_end and link(j)[1] == name
        ]
        if k and (i >= counted_end or len(later_same_tool) <= k):
            kept_by_k.add(i)
    for i in results:
        number, name = link(i)
        content = conversation[i].get("content")
        call_id = conversation[i]["tool_call_id"]
        if number >= len(turn_positions) - policy.window_turns or i in kept_by_k:
            continue
        if not isinstance(content, str):
            continue
        if policy.matcher.matches(content, call_id, name):
            continue
        if policy.keep_errors and looks_like_error(content):
            continue
        placeholder = render_placeholder(policy.placeholder_template, call_id, name, len(content))
        if len(placeholder) < len(content):
            out[i] = {**conversation[i], "content": placeholder}
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=messages(), policy=policies)
def test_the_invariants_and_the_window_rule_hold(conversation, policy):
    """For every input: the same number of messages in the same order, every
    tool_call_id and tool_calls unchanged, nothing changed but the content
    of tool messages; the window rule holds; masking is idempotent."""
    dicts = [m for m in conversation if isinstance(m, dict)]
    after = mask_old_tool_results(dicts, policy)
    assert len(after) == len(dicts)
    assert [m.get("role") for m in after] == [m.get("role") for m in dicts]
    assert [m.get("tool_call_id") for m in after] == [m.get("tool_call_id") for m in dicts]
    assert [m.get("tool_calls") for m in after] == [m.get("tool_calls") for m in dicts]
    assert check_chat_invariants(list(dicts), list(after)) == []
    assert after == expected_by_reference(list(dicts), policy)
    # Idempotence: masking its own output changes nothing.
    assert mask_old_tool_results(after, policy) == after


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conversation=messages(),
    policy=policies,
    indent=st.sampled_from([None, 0, 2, 3]),
    separators=st.sampled_from([None, (",", ":"), (" , ", " : ")]),
)
def test_whole_body_rewrite_keeps_every_other_byte(conversation, policy, indent, separators):
    """A body is rewritten only where results are masked: re-formatting it the
    way the client did gives back the output exactly, so nothing was
    re-serialised; a body with nothing to mask gets no new body at all."""
    document = {"model": "m", "messages": conversation, "stream": True, "tools": [{"x": [1]}]}
    original = json.dumps(document, indent=indent, separators=separators, ensure_ascii=False)
    outcome = mask_request_body(original.encode(), policy)
    expected_messages = expected_by_reference(conversation, policy)
    if expected_messages == conversation:
        assert outcome.body is None
        return
    assert outcome.body is not None, outcome.reason
    text = outcome.body.decode()
    assert loads(text) == {**document, "messages": expected_messages}
    assert text == json.dumps(
        {**document, "messages": expected_messages},
        indent=indent,
        separators=separators,
        ensure_ascii=False,
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    members=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    message_list=st.lists(json_values, max_size=5),
    indent=st.sampled_from([None, 1]),
)
def test_span_parser_agrees_with_json_loads(members, message_list, indent):
    """The span parser reads any request body exactly as json.loads does, and
    each recorded message span holds that message's text."""
    document = {**members, "messages": message_list}
    text = json.dumps(document, indent=indent)
    parsed = parse_request(text, "messages")
    assert parsed.members == json.loads(text)
    assert parsed.items == message_list
    for (start, end), message in zip(parsed.item_spans, message_list, strict=True):
        assert json.loads(text[start:end]) == message
