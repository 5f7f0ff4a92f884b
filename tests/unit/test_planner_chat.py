"""The planner's rules (``conversation/planning/planner.py``) on Chat Completions
``messages`` lists, through the helper ``mask_old_tool_results``
(support/chat_masking.py): the masked list out, the input untouched.

Each test states the rule it checks."""

from __future__ import annotations

import copy
import json

import pytest

from obsmask_core.conversation.settings.policy import (
    DEFAULT_PLACEHOLDER_TEMPLATE,
    MaskPolicy,
    render_placeholder,
)
from support.chat import LONG_OUTPUT, conversation, system, tool_result, tool_turn, user
from support.chat_masking import check_chat_invariants, mask_old_tool_results, plan_chat_masking

POLICY = MaskPolicy(window_turns=2)


def masked_ids(before: list[dict], after: list[dict]) -> list[str]:
    return [
        str(old["tool_call_id"])
        for old, new in zip(before, after, strict=False)
        if old.get("role") == "tool" and old["content"] != new["content"]
    ]


# Invariants --------------------------------------------------------------


def test_invariants_hold_on_a_masked_conversation():
    """Masking keeps the number of messages, their order, every tool_call_id
    and every assistant's tool_calls."""
    before = conversation(turns=5, calls_per_turn=2)
    after = mask_old_tool_results(before, POLICY)
    assert masked_ids(before, after), "the conversation must actually be masked"
    assert len(after) == len(before)
    assert [m["role"] for m in after] == [m["role"] for m in before]
    assert [m.get("tool_call_id") for m in after] == [m.get("tool_call_id") for m in before]
    assert [m.get("tool_calls") for m in after] == [m.get("tool_calls") for m in before]
    assert check_chat_invariants(before, after) == []


def test_input_is_not_modified():
    """Masking builds a new list of messages: the input stays as it was."""
    before = conversation(turns=4)
    snapshot = copy.deepcopy(before)
    mask_old_tool_results(before, POLICY)
    assert before == snapshot


def test_only_content_of_tool_messages_changes():
    """Masking replaces only the content of role="tool" messages."""
    before = conversation(turns=4)
    before[3]["name"] = "bash"  # an extra field on a tool message stays too
    after = mask_old_tool_results(before, POLICY)
    for old, new in zip(before, after, strict=False):
        assert {k: v for k, v in old.items() if k != "content"} == {
            k: v for k, v in new.items() if k != "content"
        }
        if old["role"] != "tool":
            assert old == new


def test_invariant_check_reports_each_violation():
    """The check used as a safety net sees every kind of violation: a message
    removed or reordered, a tool_call_id or a tool_calls changed, the
    content of a message that is not a tool result changed."""
    before = conversation(turns=2)
    assert check_chat_invariants(before, before[:-1])
    assert check_chat_invariants(before, [before[1], before[0], *before[2:]])
    changed_id = copy.deepcopy(before)
    changed_id[3]["tool_call_id"] = "other"
    assert any("tool_call_id" in p for p in check_chat_invariants(before, changed_id))
    changed_calls = copy.deepcopy(before)
    changed_calls[2]["tool_calls"][0]["id"] = "other"
    assert any("tool_calls" in p for p in check_chat_invariants(before, changed_calls))
    changed_user = copy.deepcopy(before)
    changed_user[1]["content"] = "edited"
    assert any("non-tool" in p for p in check_chat_invariants(before, changed_user))


# The window --------------------------------------------------------------


@pytest.mark.parametrize("window", [1, 2, 3, 7])
def test_only_results_older_than_the_window_are_masked(window):
    """With more tool turns than the window, only the results of the turns
    older than the window are masked."""
    before = conversation(turns=7)
    after = mask_old_tool_results(before, MaskPolicy(window_turns=window))
    assert masked_ids(before, after) == [f"call_{t}_0" for t in range(7 - window)]


def test_a_parallel_turn_is_one_turn():
    """Several calls in one model turn are one tool turn: all their ids are
    inside the window or all outside."""
    before = conversation(turns=4, calls_per_turn=3)
    after = mask_old_tool_results(before, POLICY)
    assert masked_ids(before, after) == [f"call_{t}_{n}" for t in range(2) for n in range(3)]


def test_placeholder_names_the_call_the_tool_and_the_size():
    """The placeholder names the tool_call_id, the tool and the size of the
    masked result."""
    before = conversation(turns=3, name="read_file")
    after = mask_old_tool_results(before, MaskPolicy(window_turns=1))
    expected = render_placeholder(
        DEFAULT_PLACEHOLDER_TEMPLATE, "call_0_0", "read_file", len(before[3]["content"])
    )
    assert after[3]["content"] == expected
    assert expected.startswith(
        "[Observation masquée: résultat d'outil ancien (tool_call_id=call_0_0"
    )
    assert "outil=read_file" in expected and f"chars={len(before[3]['content'])}" in expected


def test_unknown_tool_name_is_inconnu():
    """When the call names no tool, the placeholder's {tool_name} is
    "inconnu"."""
    before = conversation(turns=2)
    del before[2]["tool_calls"][0]["function"]
    after = mask_old_tool_results(before, MaskPolicy(window_turns=1))
    assert "outil=inconnu" in after[3]["content"]


@pytest.mark.parametrize("policy", [MaskPolicy(enabled=False), MaskPolicy(window_turns=0)])
def test_disabled_or_empty_window_changes_nothing(policy):
    """With masking disabled, or a window of 0 turns, the messages come back
    unchanged."""
    before = conversation(turns=6)
    assert mask_old_tool_results(before, policy) == before


def test_a_conversation_without_tools_is_unchanged():
    """A conversation without any tool comes back unchanged."""
    before = [system(), user("hello"), {"role": "assistant", "content": "hi"}, user("bye")]
    assert mask_old_tool_results(before, POLICY) == before


def test_assistant_with_empty_tool_calls_is_not_a_turn():
    """A tool turn needs a tool_calls list with at least one string id: an
    empty list, or calls without string ids, make no turn."""
    before = conversation(turns=2)
    before.insert(4, {"role": "assistant", "content": "thinking", "tool_calls": []})
    before.insert(5, {"role": "assistant", "content": None, "tool_calls": [{"id": 7}]})
    after = mask_old_tool_results(before, MaskPolicy(window_turns=1))
    assert masked_ids(before, after) == ["call_0_0"]


# keep_errors --------------------------------------------------------------

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/testbed/run.py", line 3, in <module>\n'
    "    main()\n" + "    " + "x" * 200 + "\nValueError: boom\n"
)


@pytest.mark.parametrize(
    "content",
    [
        TRACEBACK,
        json.dumps({"error": {"message": "rate limited", "detail": "x" * 300}}),
        json.dumps({"status": "error", "detail": "x" * 300}),
        "x" * 300 + "\nerror: pathspec 'nope' did not match any file(s) known to git\n",
        "x" * 300 + "\ncurl: (7) Failed to connect to host: Connection refused\n",
        "x" * 300 + "\nE       AssertionError: assert 1 == 2\n",
        "src/main.c:12:5: error: expected ';' before '}' token\n" + "x" * 300,
        "x" * 300 + "\nException in thread \"main\" java.lang.NullPointerException\n",
        "x" * 300 + "\nrequests.exceptions.ReadTimeout: read timed out\n",
    ],
    ids=["traceback", "json-error", "json-status", "git", "refused", "pytest", "gcc", "java",
         "timeout"],
)
def test_errors_are_kept(content):
    """A result that reads as an error (a traceback, JSON with an "error", a
    failing command's output) is not masked."""
    before = conversation(turns=3)
    before[3]["content"] = content
    after = mask_old_tool_results(before, MaskPolicy(window_turns=1))
    assert after[3]["content"] == content
    assert masked_ids(before, after) == ["call_1_0"]  # the other old one still goes


@pytest.mark.parametrize(
    "content",
    [
        # A source file that mentions errors everywhere.
        "class ValidationError(Exception):\n    pass\n\n"
        "def handle_error(self, error):\n    raise ValueError('bad')\n" * 10,
        # A config dump with a timeout setting.
        "[server]\ntimeout = 30\nretries = 3\nlog_errors = true\n" * 10,
        # JSON that says "no error".
        json.dumps({"error": None, "status": "ok", "data": "x" * 300}),
        # grep output that lists error-handling code.
        "\n".join(f"src/app.py:{n}:    except ValueError as error:" for n in range(30)),
    ],
    ids=["source", "config", "json-ok", "grep"],
)
def test_mentions_of_error_are_not_errors(content):
    """A file that merely mentions errors is not an error: it is masked like
    any other result."""
    before = conversation(turns=3)
    before[3]["content"] = content
    after = mask_old_tool_results(before, MaskPolicy(window_turns=1))
    assert after[3]["content"] != content


def test_keep_errors_off_masks_errors_too():
    before = conversation(turns=3)
    before[3]["content"] = TRACEBACK
    after = mask_old_tool_results(before, MaskPolicy(window_turns=1, keep_errors=False))
    assert masked_ids(before, after) == ["call_0_0", "call_1_0"]


# Orphans and other no-ops ------------------------------------------------


def test_orphan_is_not_masked():
    """A result whose tool_call_id no call declared is not masked."""
    before = conversation(turns=3)
    before.insert(2, tool_result("call_nowhere"))
    after = mask_old_tool_results(before, MaskPolicy(window_turns=1))
    assert after[2] == before[2]
    assert masked_ids(before, after) == ["call_0_0", "call_1_0"]


def test_result_before_its_call_is_an_orphan():
    """A result must follow the turn that called it; one that comes first is an
    orphan, and is left as it is."""
    before = conversation(turns=3)
    early = tool_result("call_2_0", "early " + LONG_OUTPUT)
    before.insert(2, early)
    after = mask_old_tool_results(before, MaskPolicy(window_turns=1))
    assert after[2] == early


def test_reused_ids_follow_the_latest_earlier_turn():
    """Some servers reuse ids like call_0 every turn: each result belongs to the
    turn just before it, so old ones are masked and the recent one is not."""
    messages = [system(), user("go")]
    for _ in range(4):
        messages += [tool_turn("call_0"), tool_result("call_0")]
    after = mask_old_tool_results(messages, MaskPolicy(window_turns=1))
    assert [after[i]["content"] == messages[i]["content"] for i in (3, 5, 7, 9)] == [
        False, False, False, True,
    ]


@pytest.mark.parametrize(
    "content",
    [[{"type": "text", "text": LONG_OUTPUT}], None, 42, {"text": LONG_OUTPUT}],
    ids=["parts", "null", "number", "object"],
)
def test_non_string_content_is_not_masked(content):
    """Content that is not a string (a list of parts, null, a number, an
    object) is left as it is."""
    before = conversation(turns=3)
    before[3]["content"] = content
    after = mask_old_tool_results(before, MaskPolicy(window_turns=1))
    assert after[3]["content"] == content


@pytest.mark.parametrize("call_id", ["", None, 17])
def test_missing_or_empty_tool_call_id_is_not_masked(call_id):
    """A result is only linked by a non-empty string tool_call_id: one without
    is not masked."""
    before = conversation(turns=3)
    before.insert(4, {"role": "tool", "tool_call_id": call_id, "content": LONG_OUTPUT})
    after = mask_old_tool_results(before, MaskPolicy(window_turns=1))
    assert after[4] == before[4]


def test_short_results_are_not_replaced_by_a_longer_placeholder():
    """A result is never replaced by a placeholder that is not shorter than
    it."""
    before = conversation(turns=3)
    before[3]["content"] = "ok"
    before[5]["content"] = "x" * 400
    after = mask_old_tool_results(before, MaskPolicy(window_turns=1))
    assert after[3]["content"] == "ok"
    assert len(after[5]["content"]) < 400


def test_placeholder_of_exactly_the_same_length_is_not_used():
    before = conversation(turns=2)
    template = "[masked {tool_call_id}]"
    same = template.format(tool_call_id="call_0_0") + "!"  # one longer
    before[3]["content"] = same[:-1].replace("masked", "MASKED")  # same length
    after = mask_old_tool_results(
        before, MaskPolicy(window_turns=1, placeholder_template=template)
    )
    assert after[3]["content"] == before[3]["content"]


# keep_last_k_per_tool -------------------------------------------------------


def test_the_last_k_results_of_each_tool_stay():
    """For each tool, the K most recent results stay intact, even outside the
    window."""
    messages = [system(), user("go")]
    names = ["read_file", "bash", "bash", "bash", "read_file", "bash", "bash"]
    for turn, name in enumerate(names):
        messages += [tool_turn(f"c{turn}", name=name), tool_result(f"c{turn}")]
    after = mask_old_tool_results(
        messages, MaskPolicy(window_turns=2, keep_last_k_per_tool=1)
    )
    # Window: c5, c6. Last read_file: c4 (kept by K=1). Last bash is c6 (in window).
    assert masked_ids(messages, after) == ["c0", "c1", "c2", "c3"]
    after_k3 = mask_old_tool_results(
        messages, MaskPolicy(window_turns=2, keep_last_k_per_tool=3)
    )
    # K=3: read_file c0, c4 and bash c3, c5, c6 stay.
    assert masked_ids(messages, after_k3) == ["c1", "c2"]


def test_a_result_sent_after_a_later_answer_is_the_most_recent_of_its_tool_and_stays():
    """A result of an old turn placed after the model's later answers came
    after the window last moved: it is more recent than every result the K
    were counted among, so keep_last_k_per_tool keeps it; without the rule
    it is masked like any result of a turn outside the window."""
    messages = [
        system(),
        tool_turn("c0", name="bash"),
        tool_turn("c1", name="bash"),
        {"role": "assistant", "content": "ok"},
        tool_result("c0", LONG_OUTPUT),
    ]
    kept = mask_old_tool_results(messages, MaskPolicy(window_turns=1, keep_last_k_per_tool=1))
    assert masked_ids(messages, kept) == []
    masked = mask_old_tool_results(messages, MaskPolicy(window_turns=1))
    assert masked_ids(messages, masked) == ["c0"]


def test_keep_last_k_zero_is_off():
    before = conversation(turns=4)
    assert mask_old_tool_results(
        before, MaskPolicy(window_turns=1, keep_last_k_per_tool=0)
    ) == mask_old_tool_results(before, MaskPolicy(window_turns=1))


# Idempotence ------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        DEFAULT_PLACEHOLDER_TEMPLATE,
        "[cleared {tool_name}#{tool_call_id}: {original_chars:,} chars]",
        "[{tool_call_id!r} omitted]",
        "(old output removed)",
    ],
)
def test_masking_is_idempotent(template):
    """Masking its own output changes nothing, whatever the template."""
    policy = MaskPolicy(window_turns=2, placeholder_template=template)
    once = mask_old_tool_results(conversation(turns=6), policy)
    assert mask_old_tool_results(once, policy) == once
    plan = plan_chat_masking(list(once), policy)
    assert plan.masked == 0 and plan.kept["already_masked"] == 4


def test_a_placeholder_for_another_call_is_not_taken_as_masked():
    """Recognition checks the id: a result that only looks like the
    placeholder of a different call is still a result of its own."""
    policy = MaskPolicy(window_turns=1, placeholder_template="[gone {tool_call_id}]" + "." * 40)
    before = conversation(turns=2)
    before[3]["content"] = "[gone call_9_9]" + "." * 40 + "x" * 20
    after = mask_old_tool_results(before, policy)
    assert after[3]["content"] == "[gone call_0_0]" + "." * 40
