"""The ConversationMasking addon inside mitmproxy's test context (no network):
configuration precedence and validation, what a masked flow carries, what
passes through untouched, and that nothing escapes into mitmproxy."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import zlib

import brotli
import pytest
import zstandard
from mitmproxy import exceptions
from mitmproxy.test import taddons, tflow, tutils

from obsmask_core.conversation.masking import verify
from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, RESPONSES
from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.settings_addon import SettingsFile
from obsmask_core.shared.config_file import RECOMMENDED_CONFIG, load_config
from obsmask_core.shared.settings import build
from obsmask_core.shared.tokens import TokenCounter
from support.chat import body, conversation
from support.chat_masking import mask_old_tool_results
from support.formats import convert, session, to_anthropic


def chat_flow(content: bytes, path: str = "/v1/chat/completions", method: str = "POST",
              headers: dict[str, str] | None = None) -> tflow.HTTPFlow:
    request = tutils.treq(method=method.encode(), path=path.encode(), content=b"")
    request.raw_content = content
    request.headers["content-type"] = "application/json"
    for name, value in (headers or {}).items():
        request.headers[name] = value
    request.headers["content-length"] = str(len(content))
    return tflow.tflow(req=request)


def masking_addons() -> tuple[SettingsFile, ConversationMasking]:
    """The conversation addon and the settings addon it reads the file from."""
    settings = SettingsFile()
    return settings, ConversationMasking(settings)


@pytest.fixture
def addon_context(toml_file):
    settings, addon = masking_addons()
    with taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_config=toml_file(""))
        yield addon, tctx


# Configuration ----------------------------------------------------------------


def test_options_win_over_the_file_which_wins_over_the_defaults(toml_file):
    """Built-in defaults are overridden by mitm.toml, which is overridden by
    options set with --set."""
    settings, addon = masking_addons()
    with taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_config=toml_file(""))
        assert addon.policy == MaskPolicy()
        tctx.configure(
            addon,
            obsmask_config=toml_file(
                "[observation_masking.schema1]\nwindow_turns = 3\nenabled = false\n"
            ),
        )
        assert addon.policy.window_turns == 3 and addon.policy.enabled is False
        # An option set to the built-in default still wins over the file.
        tctx.configure(addon, obsmask_enabled=True)
        assert addon.policy.enabled is True and addon.policy.window_turns == 3
        tctx.configure(addon, obsmask_window_turns=8)
        assert addon.policy.window_turns == 8


def test_missing_default_file_means_the_recommended_settings(tmp_path, monkeypatch):
    """Without a mitm.toml in the current directory, the recommended settings
    the package ships apply (options still win over them)."""
    monkeypatch.chdir(tmp_path)
    settings, addon = masking_addons()
    with taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_keep_errors=False)
        recommended = policy_values(load_config(str(RECOMMENDED_CONFIG)), "")
        assert addon.policy == build(MaskPolicy, {**recommended, "keep_errors": False})
        assert addon.policy.window_turns == 1 and addon.policy.price_model == "auto"
        assert addon.config_path == str(RECOMMENDED_CONFIG)


def test_the_recommended_settings_with_no_file_say_so_in_the_start_up_line(
        tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    settings, addon = masking_addons()
    with caplog.at_level(logging.INFO), taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_config=None)
    lines = [r.getMessage() for r in caplog.records if "conversation masking" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].startswith("obsmask: conversation masking on: window 1 tool turns, ")
    assert lines[0].endswith(
        "(settings: obsmask's recommended settings (no mitm.toml here))"), lines[0]


def test_the_spec_profile_gives_the_built_in_defaults_and_their_start_up_line(
        tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    settings, addon = masking_addons()
    with caplog.at_level(logging.INFO), taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_profile="spec")
        assert addon.policy == MaskPolicy()
    lines = [r.getMessage() for r in caplog.records if "conversation masking" in r.getMessage()]
    assert lines[-1] == (
        "obsmask: conversation masking on: window 8 tool turns, keep_errors=on, "
        "keep_last_k_per_tool=0 (settings: obsmask's recommended settings (no mitm.toml "
        "here), profile spec)")


def test_an_empty_settings_file_named_keeps_the_built_in_defaults(
        tmp_path, monkeypatch, toml_file, caplog):
    monkeypatch.chdir(tmp_path)
    settings, addon = masking_addons()
    empty = toml_file("")
    with caplog.at_level(logging.INFO), taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_config=empty)
        assert addon.policy == MaskPolicy()
    lines = [r.getMessage() for r in caplog.records if "conversation masking" in r.getMessage()]
    assert lines[-1].endswith(f"(settings: {empty})")


def test_default_file_in_current_directory_is_read(tmp_path, monkeypatch):
    (tmp_path / "mitm.toml").write_text("[observation_masking.schema1]\nwindow_turns = 2\n")
    monkeypatch.chdir(tmp_path)
    settings, addon = masking_addons()
    with taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_keep_errors=False)
        assert addon.policy.window_turns == 2 and addon.config_path == "mitm.toml"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[observation_masking.schema1]\nwindow_turns = -1\n", "window_turns: must be 0 or more"),
        ("[observation_masking.schema1]\nwindow_turns = '8'\n", "window_turns: must be an integer"),
        ("[observation_masking.schema1]\nwindow_turns = true\n", "must be an integer"),
        ("[observation_masking.schema1]\nenabled = 1\n", "enabled: must be a boolean"),
        ("[observation_masking.schema1]\nwindow_turn = 3\n", "window_turn: unknown key"),
        ("[observation_masking.schema1]\nplaceholder_template = '{x}'\n", "unknown field {x}"),
        ("[observation_masking.schema1]\nplaceholder_template = '{'\n", "not a valid template"),
        ("[observation_masking]\nschema1 = 3\n", "[observation_masking.schema1] must be a table"),
        ("[observation_masking.schema1\n", "not valid TOML"),
    ],
)
def test_bad_file_values_name_file_and_key(toml_file, toml, message):
    """A wrong value in the settings file stops start-up with one clear message
    naming the key and the file."""
    path = toml_file(toml)
    settings, addon = masking_addons()
    with taddons.context(settings, addon) as tctx:
        with pytest.raises(exceptions.OptionsError) as raised:
            tctx.configure(addon, obsmask_config=path)
    assert message in str(raised.value)
    assert path in str(raised.value)


def test_missing_explicit_file_is_an_error(tmp_path):
    """A settings file named with obsmask_config that does not exist is an
    OptionsError."""
    settings, addon = masking_addons()
    with taddons.context(settings, addon) as tctx:
        with pytest.raises(exceptions.OptionsError, match=r"nope\.toml: configuration file not"):
            tctx.configure(addon, obsmask_config=str(tmp_path / "nope.toml"))


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("obsmask_window_turns", -2, "obsmask_window_turns: must be 0 or more"),
        ("obsmask_keep_last_k_per_tool", -1, "obsmask_keep_last_k_per_tool: must be 0 or more"),
        ("obsmask_placeholder_template", "{tool}", "unknown field {tool}"),
        ("obsmask_chat_route", "(", "obsmask_chat_route: not a regular expression"),
    ],
)
def test_bad_option_values_are_refused(addon_context, option, value, message):
    addon, tctx = addon_context
    with pytest.raises(exceptions.OptionsError, match=message.replace("{", r"\{")):
        tctx.configure(addon, **{option: value})


def test_other_sections_of_the_file_are_ignored(toml_file):
    """mitm.toml is shared with other addons' sections ([mcp_gateway...])."""
    settings, addon = masking_addons()
    with taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_config=toml_file("[mcp_gateway.masking]\nmax_chars = 10\n"))
        assert addon.policy == MaskPolicy()


# A masked flow ------------------------------------------------------------------


def test_masked_flow_carries_comment_mark_metadata_and_backup(addon_context):
    """A masked flow carries a one-line comment, a mark, JSON-like
    flow.metadata["obsmask"], and a backup taken before the change."""
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=2)
    messages = conversation(turns=5)
    original = body(messages)
    flow = chat_flow(original)
    addon.request(flow)

    sent = json.loads(flow.request.content)
    assert sent["messages"] == mask_old_tool_results(messages, MaskPolicy(window_turns=2))
    assert flow.marked
    assert "\n" not in flow.comment and "masked 3 of 5 tool results" in flow.comment
    meta = flow.metadata["obsmask"]
    json.dumps(meta)  # JSON-like: it survives `mitmdump -w`
    assert meta["masked_tool_results"] == 3 and meta["tool_results"] == 5
    assert meta["tool_chars_after"] < meta["tool_chars_before"]
    assert meta["body_bytes_after"] == len(flow.request.raw_content) < len(original)
    assert flow.request.headers["content-length"] == str(len(flow.request.raw_content))
    flow.revert()
    assert flow.request.raw_content == original


def test_on_the_event_loop_the_masked_line_is_written_after_the_hook_changed_the_flow(
        addon_context, caplog):
    """The masked line is not written inside the hook, while the request
    waits, but two turns of the loop later."""
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=2)
    flow = chat_flow(body(conversation(turns=5)))

    def masked_lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if "tool results" in r.getMessage()]

    async def hook() -> list[str]:
        addon.request(flow)
        in_the_hook = masked_lines()
        for _ in range(2):  # the turn after next (see flows.after_this_turn)
            await asyncio.sleep(0)
        return in_the_hook

    with caplog.at_level(logging.INFO):
        in_the_hook = asyncio.run(hook())
    assert flow.marked and in_the_hook == []
    assert masked_lines() == [f"obsmask: POST /v1/chat/completions: "
                              f"{flow.comment.removeprefix('obsmask: ')}"]


def test_tokens_are_counted_once_the_encoding_is_loaded(addon_context):
    """Counted only on the parts that changed, with the encoding named."""
    addon, tctx = addon_context
    assert addon.tokens.wait_until_loaded(60)
    tctx.configure(addon, obsmask_window_turns=1)
    flow = chat_flow(body(conversation(turns=3)))
    addon.request(flow)
    meta = flow.metadata["obsmask"]
    assert meta["token_encoding"] == "cl100k_base"
    assert meta["masked_tokens_before"] > meta["masked_tokens_after"] > 0


def test_no_request_waits_for_the_encoding(addon_context):
    """Before the encoding is loaded, masking goes on and tokens say so."""
    addon, tctx = addon_context
    addon.tokens = TokenCounter()  # never started
    tctx.configure(addon, obsmask_window_turns=1)
    flow = chat_flow(body(conversation(turns=3)))
    addon.request(flow)
    meta = flow.metadata["obsmask"]
    assert meta["masked_tool_results"] == 2
    assert meta["masked_tokens_before"] is None and meta["token_encoding"] == "loading"
    assert "n/a" in flow.comment


@pytest.mark.parametrize(
    ("encoding", "compress", "decompress"),
    [
        ("gzip", gzip.compress, gzip.decompress),
        ("deflate", zlib.compress, zlib.decompress),
        ("br", brotli.compress, brotli.decompress),
        ("zstd", lambda b: zstandard.ZstdCompressor().compress(b),
         lambda b: zstandard.ZstdDecompressor().decompress(b)),
    ],
)
def test_compressed_bodies_are_masked_and_compressed_again(addon_context, encoding, compress,
                                                          decompress):
    """Compressed request bodies (gzip, deflate, br, zstd) are masked and sent
    compressed the same way."""
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=1)
    messages = conversation(turns=3)
    flow = chat_flow(compress(body(messages)), headers={"content-encoding": encoding})
    addon.request(flow)
    assert flow.request.headers["content-encoding"] == encoding
    sent = json.loads(decompress(flow.request.raw_content))
    assert sent["messages"] == mask_old_tool_results(messages, MaskPolicy(window_turns=1))


def test_undecodable_compressed_body_passes_byte_for_byte(addon_context, caplog):
    addon, _ = addon_context
    garbage = b"\x1f\x8b not really gzip"
    flow = chat_flow(garbage, headers={"content-encoding": "gzip"})
    with caplog.at_level(logging.WARNING):
        addon.request(flow)
    assert flow.request.raw_content == garbage
    assert "cannot decode content-encoding 'gzip'" in caplog.text


# What passes through untouched -----------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/chat/completions"), ("POST", "/v1/embeddings"),
     ("POST", "/v1/chat/completions/extra"), ("POST", "/v1/messages/count_tokens"),
     ("GET", "/v1/responses/resp_123")],
)
def test_other_requests_are_not_touched(addon_context, method, path, caplog):
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=1)
    original = body(conversation(turns=3))
    flow = chat_flow(original, path=path, method=method)
    with caplog.at_level(logging.DEBUG):
        addon.request(flow)
    assert flow.request.raw_content == original
    assert "obsmask" not in flow.metadata and not caplog.text


def test_route_is_configurable_and_ignores_the_query(addon_context):
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=1, obsmask_chat_route=r"/chat$")
    flow = chat_flow(body(conversation(turns=3)), path="/api/chat?api-key=secret")
    addon.request(flow)
    assert flow.metadata["obsmask"]["masked_tool_results"] == 2


def test_a_flow_read_from_a_file_keeps_what_obsmask_did_when_it_was_recorded(addon_context):
    """mitmdump -nr of flows saved through obsmask: the saved body is the one
    that went out; masking it again would report a rewrite that never
    reached the provider. A saved flow obsmask never saw is masked."""
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=1)
    recorded = chat_flow(body(conversation(turns=3)))
    addon.request(recorded)
    facts, sent = dict(recorded.metadata["obsmask"]), recorded.request.raw_content
    recorded.live = False
    addon.request(recorded)
    assert recorded.metadata["obsmask"] == facts and recorded.request.raw_content == sent
    fresh = chat_flow(body(conversation(turns=3)))
    fresh.live = False
    addon.request(fresh)
    assert fresh.metadata["obsmask"]["action"] == "masked"


def test_a_conversation_left_unmasked_gets_one_line_saying_why_per_kind_of_reason(
    addon_context, caplog,
):
    """The first request of a conversation with nothing old enough says so;
    the next one with the same reason does not; a new reason does."""
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=8)
    lines = []
    with caplog.at_level(logging.INFO, logger="obsmask_core.mitm.conversation_addon"):
        for turns in (2, 3):
            addon.request(chat_flow(json.dumps({"messages": conversation(turns=turns),
                                                "model": "m"}).encode()))
        lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert lines == ["obsmask: POST /v1/chat/completions left unmasked: nothing old enough: "
                     "2 tool result(s), all inside the window of 8 tool turn(s)"]


@pytest.mark.parametrize("refuse", [True, False])
def test_a_websocket_upgrade_on_the_responses_route_is_answered_426_only_when_asked(
    addon_context, refuse,
):
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_refuse_websockets=refuse)
    upgrade = chat_flow(b"", path="/v1/responses", method="GET")
    upgrade.request.headers["Upgrade"] = "websocket"
    addon.request(upgrade)
    if refuse:
        assert upgrade.response is not None and upgrade.response.status_code == 426
    else:
        assert upgrade.response is None
    # A POST to the same route is a conversation request as ever.
    post = chat_flow(json.dumps({"input": [], "model": "m"}).encode(), path="/v1/responses")
    addon.request(post)
    assert post.response is None and post.metadata["obsmask"]["format"] == "responses"


def test_unchanged_body_is_not_reserialised(addon_context):
    """A body obsmask does not change is forwarded byte for byte."""
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=8)
    original = json.dumps(
        {"messages": conversation(turns=3), "model": "m"}, indent=7, ensure_ascii=True
    ).encode()
    flow = chat_flow(original)
    addon.request(flow)
    assert flow.request.raw_content == original
    facts = flow.metadata["obsmask"]
    assert isinstance(facts.pop("mask_ms"), float)
    assert facts.pop("conversation").startswith("c-")
    assert facts.pop("session").startswith("s-")  # the run: its first answer's hash
    assert facts == {"action": "unchanged", "format": "chat", "reason": "nothing to mask",
                     "why": "nothing old enough: 3 tool result(s), all inside the window of 8 "
                            "tool turn(s)"}
    assert not flow.marked and not flow.comment and flow.modified() is False


def test_bytes_outside_the_masked_results_are_the_clients(addon_context):
    """Only the masked content strings change: escapes and spacing elsewhere stay."""
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=1)
    original = json.dumps(
        {"model": "modèle", "messages": conversation(turns=2)}, indent=1, ensure_ascii=True
    ).encode()
    flow = chat_flow(original)
    addon.request(flow)
    after = flow.request.raw_content
    content = json.dumps(conversation(turns=2)[3]["content"], ensure_ascii=True).encode()
    start = original.index(content)
    assert after[:start] == original[:start]
    assert after.endswith(original[start + len(content):])


def test_a_request_made_from_the_previous_masked_body_says_so(addon_context):
    """A retry of a masked request goes out as the first did, made from its
    masked body, and its flow says so; the first, masked anew, does not."""
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=1)
    original = body(conversation(turns=3))
    first, again = chat_flow(original), chat_flow(original)
    addon.request(first)
    addon.request(again)
    assert first.metadata["obsmask"]["action"] == "masked"
    assert "reused_previous_body" not in first.metadata["obsmask"]
    assert again.metadata["obsmask"]["reused_previous_body"] is True
    assert again.request.raw_content == first.request.raw_content != original


def test_a_failing_check_forwards_the_original(addon_context, monkeypatch, caplog):
    """If the masked body ever broke one of the rules of masking, the original
    is forwarded and an error is logged."""
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=1)

    monkeypatch.setattr(
        verify, "check_only_planned_changes", lambda before, after, plan, fmt, also: ["broken"]
    )
    original = body(conversation(turns=3))
    flow = chat_flow(original)
    with caplog.at_level(logging.ERROR):
        addon.request(flow)
    assert flow.request.raw_content == original
    assert "broke an invariant (broken)" in caplog.text
    assert flow.metadata["obsmask"]["action"] == "passed_through"


def test_internal_errors_never_reach_mitmproxy(addon_context, monkeypatch, caplog):
    addon, _ = addon_context

    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(Masker, "mask", explode)
    original = body(conversation(turns=3))
    flow = chat_flow(original)
    with caplog.at_level(logging.ERROR):
        addon.request(flow)  # must not raise
    assert flow.request.raw_content == original
    assert "internal error, POST /v1/chat/completions forwarded unchanged" in caplog.text


def test_logs_never_carry_bodies_or_headers(addon_context, caplog):
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=1)
    messages = conversation(turns=3)
    messages[1]["content"] = "SECRET-PROMPT"
    flow = chat_flow(body(messages), headers={"authorization": "Bearer SECRET-KEY"},
                     path="/v1/chat/completions?key=SECRET-QUERY")
    with caplog.at_level(logging.DEBUG):
        addon.request(flow)
        addon.request(chat_flow(b"SECRET-BODY{"))
    assert caplog.text.count("obsmask:") == 2
    assert "SECRET" not in caplog.text


# Streaming -------------------------------------------------------------------------


def test_event_streams_of_matching_requests_are_streamed(addon_context):
    addon, tctx = addon_context
    flow = chat_flow(body(conversation(turns=1)))
    flow.response = tutils.tresp(headers=[(b"content-type", b"text/event-stream; charset=utf-8")])
    addon.responseheaders(flow)
    assert callable(flow.response.stream)

    other = chat_flow(b"{}", path="/v1/models", method="GET")
    other.response = tutils.tresp(headers=[(b"content-type", b"text/event-stream")])
    addon.responseheaders(other)
    assert not other.response.stream

    tctx.configure(addon, obsmask_stream_responses=False)
    off = chat_flow(body(conversation(turns=1)))
    off.response = tutils.tresp(headers=[(b"content-type", b"text/event-stream")])
    addon.responseheaders(off)
    assert not off.response.stream


def test_json_answers_stay_buffered(addon_context):
    addon, _ = addon_context
    flow = chat_flow(body(conversation(turns=1)))
    flow.response = tutils.tresp(headers=[(b"content-type", b"application/json")])
    addon.responseheaders(flow)
    assert not flow.response.stream


# Three wire formats ------------------------------------------------------------------


def test_each_route_is_read_as_its_format(addon_context):
    """Anthropic Messages on .../v1/messages and OpenAI Responses on
    .../v1/responses are each masked by the same policy."""
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=1)
    for fmt, path in ((ANTHROPIC, "/v1/messages"), (RESPONSES, "/v1/responses")):
        items = convert(fmt, session(turns=3))
        flow = chat_flow(json.dumps({"model": "m", fmt.list_member: items}).encode(), path=path)
        addon.request(flow)
        sent = json.loads(flow.request.content)
        assert sent[fmt.list_member] == mask_items(items, MaskPolicy(window_turns=1), fmt)
        assert flow.metadata["obsmask"]["format"] == fmt.name
        assert flow.metadata["obsmask"]["masked_tool_results"] == 2


def test_a_body_of_the_wrong_shape_passes_byte_for_byte(addon_context, caplog):
    """A body whose shape does not match its route passes through byte for
    byte."""
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=1)
    bodies = {
        "/v1/responses": json.dumps({"model": "m", "input": "just a prompt"}).encode(),
        "/v1/messages": json.dumps({"model": "m", "prompt": "old completion API"}).encode(),
    }
    for path, original in bodies.items():
        flow = chat_flow(original, path=path)
        with caplog.at_level(logging.WARNING):
            addon.request(flow)
        assert flow.request.raw_content == original
        assert flow.metadata["obsmask"]["action"] == "passed_through"
    assert "'input' is not a list" in caplog.text
    assert "the object has no 'messages'" in caplog.text


def test_routes_are_options_and_empty_turns_a_format_off(addon_context):
    addon, tctx = addon_context
    tctx.configure(addon, obsmask_window_turns=1, obsmask_anthropic_route="",
                   obsmask_responses_route=r"/api/agent$")
    anthropic = json.dumps({"messages": to_anthropic(session(turns=3))}).encode()
    flow = chat_flow(anthropic, path="/v1/messages")
    addon.request(flow)
    assert flow.request.raw_content == anthropic and "obsmask" not in flow.metadata

    responses = json.dumps({"input": convert(RESPONSES, session(turns=3))}).encode()
    flow = chat_flow(responses, path="/api/agent")
    addon.request(flow)
    assert flow.metadata["obsmask"]["format"] == "responses"


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/responses"])
def test_event_streams_of_every_format_are_streamed(addon_context, path):
    """Streamed answers (SSE) of all three APIs pass through as a stream."""
    addon, _ = addon_context
    flow = chat_flow(b"{}", path=path)
    flow.response = tutils.tresp(headers=[(b"content-type", b"text/event-stream")])
    addon.responseheaders(flow)
    assert callable(flow.response.stream)


# The usage the provider reported --------------------------------------------------------

CHAT_USAGE = {"prompt_tokens": 5000, "completion_tokens": 20,
              "prompt_tokens_details": {"cached_tokens": 4096}}


def test_usage_of_a_buffered_answer_is_recorded(addon_context):
    """The input and cached input tokens the provider reported in a buffered
    answer (usage.prompt_tokens_details.cached_tokens for OpenAI) are
    recorded on the flow."""
    addon, _ = addon_context
    flow = chat_flow(body(conversation(turns=1)))
    flow.response = tutils.tresp(content=json.dumps({"choices": [], "usage": CHAT_USAGE}).encode())
    flow.response.headers["content-type"] = "application/json"
    addon.response(flow)
    assert flow.metadata["obsmask"]["provider_usage"] == {
        "input_tokens": 5000, "cached_input_tokens": 4096, "output_tokens": 20,
    }
    assert "provider reported 5,000 input tokens, 4,096 read from its cache" in flow.comment


def test_on_the_event_loop_the_usage_line_is_written_after_the_answer_went_on(
        addon_context, caplog):
    """The answer goes on before the usage line is written."""
    addon, _ = addon_context
    flow = chat_flow(body(conversation(turns=1)))
    flow.response = tutils.tresp(content=json.dumps({"choices": [], "usage": CHAT_USAGE}).encode())
    flow.response.headers["content-type"] = "application/json"

    async def hook() -> int:
        addon.response(flow)
        in_the_hook = len(caplog.records)
        for _ in range(2):  # the turn after next (see flows.after_this_turn)
            await asyncio.sleep(0)
        return in_the_hook

    with caplog.at_level(logging.INFO):
        in_the_hook = asyncio.run(hook())
    assert in_the_hook == 0 and "provider reported 5,000" in flow.comment
    assert [r.getMessage() for r in caplog.records] == [
        "obsmask: provider reported 5,000 input tokens, 4,096 read from its cache "
        "(POST /v1/chat/completions)"]


def test_usage_in_the_last_event_of_a_stream_is_recorded(addon_context):
    """The cache_read_input_tokens and cache_creation_input_tokens Anthropic
    reports in the events of a streamed answer are recorded on the flow;
    every chunk goes on unchanged."""
    addon, _ = addon_context
    flow = chat_flow(b"{}", path="/v1/messages")
    flow.response = tutils.tresp(headers=[(b"content-type", b"text/event-stream")])
    addon.responseheaders(flow)
    events = (
        b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
        b'{"input_tokens":12,"cache_read_input_tokens":30000,'
        b'"cache_creation_input_tokens":800,"output_tokens":1}}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"hi"}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{},'
        b'"usage":{"output_tokens":57}}\n\n'
    )
    chunks = [events[i : i + 7] for i in range(0, len(events), 7)]
    assert [flow.response.stream(chunk) for chunk in chunks] == chunks
    assert flow.response.stream(b"") == b""
    assert flow.metadata["obsmask"]["provider_usage"] == {
        "input_tokens": 12, "cached_input_tokens": 30000,
        "cache_creation_input_tokens": 800, "output_tokens": 57,
    }
    assert "30,000 read from its cache, 800 written to it" in flow.comment


def test_a_broken_usage_report_changes_nothing(addon_context):
    addon, _ = addon_context
    flow = chat_flow(body(conversation(turns=1)))
    flow.response = tutils.tresp(content=b"<html>502</html>")
    addon.response(flow)
    assert flow.response.content == b"<html>502</html>"
    assert "provider_usage" not in flow.metadata.get("obsmask", {})


def test_profile_overlays_the_file_and_options_still_win(toml_file):
    """A profile (here for providers without a prompt cache) overlays the
    file's settings: defaults < [observation_masking.schema1] < the chosen
    profile < options."""
    path = toml_file(
        "[observation_masking.schema1]\nwindow_turns = 4\nmin_free_percent = 80\n"
        "[observation_masking.profiles.no_cache]\nwindow_turns = 3\nmin_free_percent = 0\n"
    )
    settings, addon = masking_addons()
    with taddons.context(settings, addon) as tctx:
        tctx.configure(addon, obsmask_config=path)
        assert (addon.policy.window_turns, addon.policy.min_free_percent) == (4, 80)
        tctx.configure(addon, obsmask_profile="no_cache")
        assert (addon.policy.window_turns, addon.policy.min_free_percent) == (3, 0)
        tctx.configure(addon, obsmask_window_turns=6)
        assert addon.policy.window_turns == 6
        with pytest.raises(exceptions.OptionsError, match="no profile 'cheap'"):
            tctx.configure(addon, obsmask_profile="cheap")


def test_the_cache_and_budget_keys_are_options(addon_context):
    addon, tctx = addon_context
    tctx.configure(
        addon, obsmask_batch_turns=5, obsmask_exclude_tools=["read_file", "grep"],
        obsmask_preserve_patterns=["<keep>|</keep>"], obsmask_max_input_tokens=50_000,
    )
    policy = addon.policy
    assert policy.batch_turns == 5 and policy.exclude_tools == ("read_file", "grep")
    assert policy.preserve_patterns == (("<keep>", "</keep>"),)
    assert policy.max_input_tokens == 50_000
    with pytest.raises(exceptions.OptionsError, match="obsmask_preserve_patterns"):
        tctx.configure(addon, obsmask_preserve_patterns=["no separator"])
    with pytest.raises(exceptions.OptionsError, match="obsmask_batch_turns: must be 1 or more"):
        tctx.configure(addon, obsmask_batch_turns=0)
