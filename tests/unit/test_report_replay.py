"""The report's conversations, policy and replay (scripts/benchlib/report/:
conversations.py, policy_choice.py, bills.py, replayed_plans.py,
request_numbers.py), on conversations built here in each wire format."""

from __future__ import annotations

import copy
import json
import re
from itertools import accumulate

import pytest

from benchlib.errors import BenchError
from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.planning.holdout import conversation_id
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, CHAT, WireFormat
from obsmask_core.offline.cache.block_tokens import MessageTokens, load_encoder
from obsmask_core.offline.cache.formats import request_ends
from obsmask_core.offline.report.bills import bill_conversation, growing_runs
from obsmask_core.offline.report.conversations import (
    OTHER,
    ParsedBody,
    group_conversations,
    parse_body,
)
from obsmask_core.offline.report.estimates import prompt_tokens
from obsmask_core.offline.report.figures import cache_figure, frontier_figure, token_figure
from obsmask_core.offline.report.flow_file import RecordedRequest
from obsmask_core.offline.report.policy_choice import PolicyChooser, UserSettings, recorded_settings
from obsmask_core.offline.report.replayed_plans import replay_plan
from obsmask_core.offline.report.request_numbers import request_numbers
from obsmask_core.shared import config_file
from support.formats import FORMAT_IDS, FORMATS, convert, session

ENCODE = load_encoder()


@pytest.fixture(scope="module")
def tokens() -> MessageTokens:
    return MessageTokens(ENCODE)


def body_of(fmt: WireFormat, items: list[object]) -> bytes:
    extra = {"system": "You are a coding agent."} if fmt is ANTHROPIC else {}
    return json.dumps({"model": "m", fmt.list_member: items, **extra}).encode()


def recorded(fmt: WireFormat, original: bytes, sent: bytes | None = None,
             number: int = 1, **masking: object) -> RecordedRequest:
    return RecordedRequest(number, "flows.mitm", "/v1/x", fmt, original,
                           original if sent is None else sent, masking)


def requests_of(fmt: WireFormat, turns: int) -> list[list[object]]:
    """The lists a client sends: each ends before an answer of the model
    (bench_cache's reading of a session), and the whole list is the last."""
    items = convert(fmt, session(turns))
    return [items[:end] for end in request_ends(items, fmt)]


# Conversations ----------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_a_request_recorded_without_obsmask_is_named_by_its_first_user_message(fmt):
    items = convert(fmt, session(2))
    [group] = group_conversations([recorded(fmt, body_of(fmt, items))])
    assert group.name == conversation_id(items) and group.fmt is fmt


def test_the_conversation_name_obsmask_recorded_wins():
    items = convert(CHAT, session(2))
    [group] = group_conversations([recorded(CHAT, body_of(CHAT, items),
                                            conversation="c-000000000042")])
    assert group.name == "c-000000000042"


def test_a_body_that_is_not_its_format_goes_to_the_group_of_no_conversation_last():
    items = convert(CHAT, session(1))
    groups = group_conversations([recorded(CHAT, b"this is not JSON {", number=1),
                                  recorded(CHAT, body_of(CHAT, items), number=2),
                                  recorded(CHAT, b'{"messages": 3}', number=3)])
    assert [g.name for g in groups] == [conversation_id(items), OTHER]
    assert [r.recorded.flow_number for r in groups[1].requests] == [1, 3]
    assert groups[1].fmt is None


def test_the_same_task_in_two_formats_is_two_conversations_numbered_apart():
    chat = [recorded(CHAT, body_of(CHAT, items), number=n)
            for n, items in enumerate(requests_of(CHAT, 2), start=1)]
    anthropic = [recorded(ANTHROPIC, body_of(ANTHROPIC, items), number=10 + n)
                 for n, items in enumerate(requests_of(ANTHROPIC, 2), start=1)]
    groups = group_conversations([chat[0], anthropic[0], chat[1], anthropic[1]])
    assert [(g.fmt, [r.number for r in g.requests]) for g in groups] == [
        (CHAT, [1, 2]), (ANTHROPIC, [1, 2])]


def test_the_original_body_is_read_from_the_backup_and_the_sent_one_from_the_request():
    items = convert(CHAT, session(12))
    masked = mask_items(items, MaskPolicy(window_turns=1), CHAT)
    [group] = group_conversations([recorded(CHAT, body_of(CHAT, items),
                                            body_of(CHAT, masked))])
    [request] = group.requests
    assert request.original.items == items and request.sent.items == masked


# The policy -------------------------------------------------------------------


def test_without_settings_the_values_the_flows_recorded_go_over_the_settings_file(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mitm.toml").write_text(
        "[observation_masking.schema1]\nwindow_turns = 4\nmin_free_percent = 80\n")
    chooser = PolicyChooser(UserSettings())
    recorded_values = recorded_settings([
        {"action": "masked", "window_turns": 2, "bill": {"price_model": "openai"}},
        {"action": "unchanged", "bill": {"price_model": "openai", "allowance_percent": 3}},
    ])
    assert recorded_values == {"window_turns": 2, "price_model": "openai",
                               "allowance_percent": 3}
    replay = chooser.for_conversation(recorded_values)
    assert (replay.policy.window_turns, replay.policy.min_free_percent,
            replay.policy.price_model, replay.policy.allowance_percent) == (2, 80, "openai", 3)
    assert replay.source == (
        "mitm.toml [observation_masking.schema1]; with window_turns = 2, price_model = "
        "'openai', allowance_percent = 3 as the flows recorded")
    assert replay.differences == ()


def test_the_minimum_size_and_payback_factor_a_masked_request_recorded_are_followed(
        tmp_path, monkeypatch):
    """A proxy run without mitm.toml masks results the recommended
    min_chars would keep: the replay takes the recorded values, not the
    report's own (an older flow without them leaves the report's)."""
    monkeypatch.chdir(tmp_path)
    recorded_values = recorded_settings([
        {"action": "masked", "window_turns": 2, "min_chars": 0, "payback_factor": 0},
        {"action": "unchanged", "min_chars": 500},
    ])
    assert recorded_values == {"window_turns": 2, "min_chars": 0, "payback_factor": 0,
                               "price_model": "none"}
    replay = PolicyChooser(UserSettings()).for_conversation(recorded_values)
    assert (replay.policy.min_chars, replay.policy.payback_factor) == (0, 0)
    older = PolicyChooser(UserSettings()).for_conversation(
        recorded_settings([{"action": "masked", "window_turns": 2}]))
    assert (older.policy.min_chars, older.policy.payback_factor) == (300, 8)


def test_a_bill_priced_by_a_row_of_the_model_table_is_replayed_under_auto():
    """Under "auto" the bill names its model's row, not a setting: the
    replay prices each request by its model again."""
    assert recorded_settings([
        {"action": "masked", "window_turns": 1,
         "bill": {"price_model": "claude-fable-5", "allowance_percent": 2,
                  "model_row": {"row": "claude-fable-5", "known": True}}},
    ]) == {"window_turns": 1, "price_model": "auto", "allowance_percent": 2}


def test_a_masked_request_without_a_bill_was_masked_without_a_cache_price_model():
    assert recorded_settings([
        {"action": "masked", "window_turns": 3,
         "bill": {"price_model": "anthropic", "allowance_percent": 2}},
        {"action": "masked", "window_turns": 3},
        {"action": "unchanged"},
    ]) == {"window_turns": 3, "price_model": "none"}


def test_a_recorded_value_beyond_2_53_or_of_the_wrong_type_is_read_as_not_recorded():
    assert recorded_settings([
        {"action": "masked", "window_turns": 10**400,
         "bill": {"price_model": 7, "allowance_percent": 10**400}},
        {"action": ["masked"], "window_turns": 3},
    ]) == {}
    # A bill that is no mapping is no bill: the masked request had no cache.
    assert recorded_settings([{"action": "masked", "window_turns": 2, "bill": "openai"}]) == {
        "window_turns": 2, "price_model": "none"}


@pytest.mark.parametrize("assignment", [
    "obsmask_chat_route=/llm/chat$", r"obsmask_hosts=^llm\.internal$", "mcpmask_max_chars=10"])
def test_a_set_of_a_route_or_of_another_feature_still_follows_the_recorded_values(
        tmp_path, monkeypatch, assignment):
    """Only the masking policy's options (its settings, the master switch,
    the file and the profile) are settings given: a route says which flows
    are conversations, not how one is masked."""
    monkeypatch.chdir(tmp_path)
    chooser = PolicyChooser(UserSettings(None, (assignment,)))
    replay = chooser.for_conversation({"window_turns": 2, "price_model": "openai"})
    assert (replay.policy.window_turns, replay.policy.price_model) == (2, "openai")
    assert "as the flows recorded" in replay.source and replay.differences == ()
    assert "with each conversation's recorded window_turns" in chooser.source_statement()


def test_a_route_given_with_set_is_named_beside_the_recorded_values(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    chooser = PolicyChooser(UserSettings(None, ("obsmask_chat_route=/llm/chat$",)))
    assert chooser.routes().chat_route == "/llm/chat$"
    assert chooser.source_statement().endswith(
        "as each conversation states; the conversations are the requests on the routes of "
        "--set obsmask_chat_route")


@pytest.mark.parametrize("assignment", [
    "obsmask_window_turns=5", "obsmask_all_enabled=true", "obsmask_profile=no_cache"])
def test_a_set_of_the_policy_the_switch_or_the_profile_is_a_setting_given(
        tmp_path, monkeypatch, assignment):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mitm.toml").write_text(
        '[observation_masking.profiles.no_cache]\nprice_model = "none"\n')
    replay = PolicyChooser(UserSettings(None, (assignment,))).for_conversation(
        {"window_turns": 2})
    assert "as the flows recorded" not in replay.source
    assert replay.differences == (
        f"window_turns: 2 in the flows, {replay.policy.window_turns} in this replay",)


def test_a_recorded_value_equal_to_the_one_in_force_is_not_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # and no recommended settings: the built-in defaults
    monkeypatch.setattr(config_file, "RECOMMENDED_CONFIG", tmp_path / "not-shipped.toml")
    replay = PolicyChooser(UserSettings()).for_conversation(
        {"window_turns": 2, "price_model": "none"})
    assert replay.policy.window_turns == 2 and replay.policy.price_model == "none"
    assert replay.source == ("the built-in defaults (no mitm.toml in the current directory); "
                             "with window_turns = 2 as the flows recorded")


def test_the_users_settings_win_and_the_recorded_values_they_contradict_are_listed(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "other.toml"
    config.write_text("[observation_masking.schema1]\nwindow_turns = 4\n"
                      "[observation_masking.profiles.short]\nwindow_turns = 1\n")
    chooser = PolicyChooser(UserSettings(str(config), (
        "obsmask_profile=short", "obsmask_keep_errors=false",
        "obsmask_exclude_tools=read", "obsmask_exclude_tools=grep", "mcpmask_max_chars=10")))
    replay = chooser.for_conversation({"window_turns": 2})
    assert replay.policy.window_turns == 1 and not replay.policy.keep_errors
    assert replay.policy.exclude_tools == ("read", "grep")
    assert replay.differences == ("window_turns: 2 in the flows, 1 in this replay",)
    assert chooser.ignored == ("mcpmask_max_chars",)
    assert "--set obsmask_keep_errors" in replay.source and "profile short" in replay.source


def test_the_master_switch_turns_the_replayed_masking_off(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    chooser = PolicyChooser(UserSettings(None, ("obsmask_all_enabled=false",)))
    assert not chooser.for_conversation({}).policy.enabled


def test_the_page_says_which_settings_the_replay_follows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "other.toml"
    config.write_text("[observation_masking.profiles.short]\nwindow_turns = 1\n")
    given = PolicyChooser(UserSettings(str(config), (
        "obsmask_profile=short", "mcpmask_max_chars=10", "obsmask_window_turns=3")))
    assert given.source_statement() == (
        f"the user's settings (--config {config}, --set obsmask_profile, --set "
        f"obsmask_window_turns) over {config} [observation_masking.schema1], profile short; "
        "the values the flows recorded are not followed, and each conversation lists those "
        "its replay contradicts; these options change no replayed request and are ignored: "
        "mcpmask_max_chars")
    assert PolicyChooser(UserSettings()).source_statement() == (
        "obsmask's recommended settings (no mitm.toml here) [observation_masking.schema1], "
        "with each "
        "conversation's recorded window_turns, min_chars, payback_factor, price_model, "
        "allowance_percent over it (from its flows' metadata, when obsmask recorded them), "
        "as each conversation states")


def test_a_settings_file_that_switches_masking_off_keeps_it_off_under_the_recorded_values(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mitm.toml").write_text("[obsmask]\nenabled = false\n")
    replay = PolicyChooser(UserSettings()).for_conversation({"window_turns": 2})
    assert not replay.policy.enabled and replay.policy.window_turns == 2
    assert replay.source == (
        "mitm.toml [observation_masking.schema1]; with window_turns = 2 as the flows "
        "recorded; masking switched off ([obsmask] enabled / obsmask_all_enabled)")


def test_a_wrong_recorded_value_stops_the_report_naming_the_flows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BenchError, match=r"^obsmask_window_turns \(the flows' metadata\): "
                                         r"must be 0 or more, got -1$"):
        PolicyChooser(UserSettings()).for_conversation({"window_turns": -1})


# mitmproxy's own words for a value it cannot parse (11 and 12 word them differently).
NOT_AN_INTEGER = r"(Not an integer|Failed to parse option \S+: not an integer): "


@pytest.mark.parametrize(("assignment", "message"), [
    ("obsmask_window_turns=ten", rf"--set obsmask_window_turns=ten: {NOT_AN_INTEGER}ten"),
    ("obsmask_window_turns=-1", r"obsmask_window_turns: must be 0 or more, got -1"),
    ("obsmask_price_model=cheap", r"obsmask_price_model: must be one of anthropic, openai, "
                                  r"openai_50, none, auto, got 'cheap'"),
    ("window_turns=2", r"unknown option window_turns \(did you mean obsmask_window_turns\?\)"),
    ("obsmask_window_turn=2",
     r"unknown option obsmask_window_turn \(did you mean obsmask_window_turns\?\)"),
    ("obsmask_window_turns", r"--set obsmask_window_turns=: Option is required: "
                             r"obsmask_window_turns"),
    ("obsmask_keep_errors=maybe", r'--set obsmask_keep_errors=maybe: .*"true", "false", or '
                                  r'have the value omitted.*'),
])
def test_a_wrong_setting_stops_the_report_naming_it_as_measure_py_does(
        tmp_path, monkeypatch, assignment, message):
    """Read by the reader measure.py uses: the proxy's option names, value
    syntax and words (report.py puts its name before the line)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BenchError) as refused:
        PolicyChooser(UserSettings(None, (assignment,)))
    assert re.fullmatch(message, str(refused.value)), str(refused.value)


def test_a_settings_file_that_does_not_exist_stops_the_report(tmp_path):
    missing = tmp_path / "missing.toml"
    with pytest.raises(BenchError, match=rf"^{re.escape(str(missing))}: configuration file "
                                         r"not found$"):
        PolicyChooser(UserSettings(str(missing)))


# The replay -------------------------------------------------------------------


def numbered(fmt: WireFormat, lists: list[list[object]]) -> list[tuple[int, ParsedBody]]:
    bodies = [(n, parse_body(body_of(fmt, items), fmt)) for n, items in enumerate(lists, 1)]
    assert all(body is not None for _, body in bodies)
    return bodies  # type: ignore[return-value]


def test_requests_that_continue_each_other_are_one_run_and_a_rewritten_history_starts_another():
    lists = requests_of(CHAT, 4)
    rewritten = [lists[0][0], {"role": "user", "content": "Summary so far."}]
    runs = growing_runs(numbered(CHAT, [*lists[:3], rewritten, [*rewritten, lists[3][-1]]]))
    assert [[n for n, _ in run] for run in runs] == [[1, 2, 3], [4, 5]]


def test_a_moved_cache_breakpoint_does_not_start_a_new_run():
    """Claude Code marks the last item of each request with a cache
    breakpoint: the next request's copy of that item has none."""
    marked = [copy.deepcopy(items) for items in requests_of(ANTHROPIC, 3)]
    for items in marked:
        items[-1]["cache_control"] = {"type": "ephemeral"}
    runs = growing_runs(numbered(ANTHROPIC, marked))
    assert [[n for n, _ in run] for run in runs] == [list(range(1, len(marked) + 1))]


def sent_tokens(body: ParsedBody, fmt: WireFormat, tokens: MessageTokens) -> int:
    """A request's input tokens as the report counts them (``prompt_tokens``:
    as the bill sends and reads it)."""
    return prompt_tokens(body, fmt, tokens)


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_without_a_cache_the_bill_so_far_adds_up_the_input_tokens_of_each_request(fmt, tokens):
    """Under the price model "none" a request costs its input tokens: the
    bill without masking adds up the original requests' tokens, the bill
    with masking those of the requests as the policy masks them (an
    Anthropic request as Claude Code sends it)."""
    policy = MaskPolicy(window_turns=1)
    bodies = numbered(fmt, requests_of(fmt, 10))
    bill = bill_conversation(bodies, fmt, policy, tokens)
    none = next(model for model in bill.models if model.name == "none")
    assert none.without_masking == tuple(accumulate(
        float(sent_tokens(body, fmt, tokens)) for _, body in bodies))
    assert none.with_masking == tuple(accumulate(
        float(sent_tokens(ParsedBody(mask_items(body.items, policy, fmt), body.preamble), fmt,
                          tokens)) for _, body in bodies))
    assert none.with_masking[-1] < none.without_masking[-1]
    assert [model.name for model in bill.models] == ["anthropic", "openai", "openai_50", "none"]
    assert bill.request_numbers == tuple(range(1, len(bodies) + 1)) and bill.restarts == ()


def test_a_new_run_carries_the_bill_so_far_of_the_one_before(tokens):
    lists = requests_of(CHAT, 3)
    rewritten = [lists[0][0], {"role": "user", "content": "Summary so far."}]
    bodies = numbered(CHAT, [*lists, rewritten])
    bill = bill_conversation(bodies, CHAT, MaskPolicy(enabled=False), tokens)
    none = next(model for model in bill.models if model.name == "none")
    assert bill.restarts == (len(lists) + 1,)
    assert none.without_masking[-1] == none.without_masking[-2] + prompt_tokens(
        bodies[-1][1], CHAT, tokens)


def test_with_masking_off_both_bills_are_the_same(tokens):
    bill = bill_conversation(numbered(CHAT, requests_of(CHAT, 10)), CHAT,
                             MaskPolicy(enabled=False), tokens)
    assert all(model.with_masking == model.without_masking for model in bill.models)


def test_the_replayed_plan_says_whether_the_request_comes_out_as_it_was_sent(tokens):
    policy = MaskPolicy(window_turns=1)
    items = convert(CHAT, session(6))
    original = parse_body(body_of(CHAT, items), CHAT)
    masked = parse_body(body_of(CHAT, mask_items(items, policy, CHAT)), CHAT)
    plan = replay_plan(original, masked, CHAT, policy, tokens)
    assert plan.as_sent is True and plan.masked == 5 and plan.tool_turns == 6
    assert plan.frontier_turn == 5 and plan.stage == "masking"
    assert plan.input_tokens == prompt_tokens(masked, CHAT, tokens) < prompt_tokens(
        original, CHAT, tokens)
    assert replay_plan(original, original, CHAT, policy, tokens).as_sent is False
    assert replay_plan(original, None, CHAT, policy, tokens).as_sent is None


def test_a_held_out_conversation_is_replayed_unmasked_and_the_plan_says_it_is_held_out(tokens):
    items = convert(CHAT, session(6))
    original = parse_body(body_of(CHAT, items), CHAT)
    held = replay_plan(original, original, CHAT, MaskPolicy(window_turns=1,
                                                            holdout_percent=100), tokens)
    assert held.held_out and held.masked == 0 and held.as_sent is True
    masked = replay_plan(original, None, CHAT, MaskPolicy(window_turns=1), tokens)
    assert not masked.held_out and masked.masked == 5


# What obsmask recorded ---------------------------------------------------------


def test_a_recorded_figure_beyond_2_53_is_read_as_not_recorded_and_the_figures_draw(tokens):
    """A flow file is untrusted: 10**400 would overflow a float in the plots."""
    items = convert(CHAT, session(2))
    [group] = group_conversations([recorded(
        CHAT, body_of(CHAT, items), action="unchanged", frontier_turn=10**400,
        tool_turns=2**53 + 1, masked_tool_results=-1, stage=3, conversation=["c-1"],
        provider_usage={"input_tokens": 10**400, "cached_input_tokens": 5})])
    assert group.name == conversation_id(items)  # the recorded name was no string
    numbers = request_numbers(group.requests[0], tokens, None)
    assert (numbers.frontier_turn, numbers.tool_turns, numbers.masked, numbers.stage) == (
        None, None, None, None)
    assert numbers.provider is not None and numbers.provider.input_tokens is None
    assert numbers.provider.cached_input_tokens == 5
    token_figure([numbers])
    frontier_figure([numbers])
    assert cache_figure([numbers]) is not None
    only_huge = recorded(CHAT, body_of(CHAT, items), provider_usage={"input_tokens": 10**400})
    [group] = group_conversations([only_huge])
    assert request_numbers(group.requests[0], tokens, None).provider is None
