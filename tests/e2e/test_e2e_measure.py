"""End to end: ``scripts/measure.py`` measures a session recorded through
obsmask as if it had been recorded without it.

The same session is recorded twice through a real ``mitmdump -w FILE`` with
obsmask, driven by a real SDK client against a stub provider: once with
masking on (``--set obsmask_window_turns=2``: the provider receives masked
bodies, the flows hold them and keep the client's originals as their
backup) and once with masking off (``--set obsmask_enabled=false``). Then
measure.py on each file, with the same settings, gives the same JSON
document but for the file names and what the recording itself says (under
the keys ``file`` and ``recorded``: how many requests were masked when
recorded, and the provider's own figures, which differ because the provider
received different bodies). Done for Chat Completions (tests/clients/
chat_agent.py, the ``openai`` SDK) and Anthropic Messages
(tests/support/anthropic_shell_agent.py, the ``anthropic`` SDK, against the
scripted server that reports a prompt cache's figures).

Also: on the saved flows of fixtures/flows/, the headline figures are the
cache benchmark's replay of the same bodies; and a wrong option stops the
command with one line and status 2.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from benchlib.cache.figures import session_figures
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.offline.cache.block_tokens import MessageTokens, load_encoder
from obsmask_core.offline.cache.sessions import load_input
from obsmask_core.offline.recorded_requests import recorded_requests
from support.agents import CLIENTS, needs_clients, run_agent
from support.anthropic_shell_agent import run_shell_agent
from support.flow_files import post_flow, write_flows
from support.json_values import as_list, as_object
from support.processes import REPO, MitmdumpProcess, recording_arguments, running_mitmdump
from support.recording_server import Answer, Recorded, common_prefix_length, recording_server
from support.scripted_anthropic import scripted_anthropic

MEASURE = REPO / "scripts" / "measure.py"
MEASURE_TIMEOUT = 300.0
WINDOW_TURNS = 2
MASKING_ON = ("--set", f"obsmask_window_turns={WINDOW_TURNS}")
MASKING_OFF = ("--set", "obsmask_enabled=false")
# What the recordings themselves say; everything else must be equal. The
# proxy's bill is what the proxy did when it recorded (masking on or off),
# where a flow holds obsmask's record.
RECORDING_KEYS = frozenset({"file", "recorded", "proxy_bill"})

Json = dict[str, object]


# measure.py ----------------------------------------------------------------------


def run_measure(*arguments: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(MEASURE), *arguments], cwd=cwd,
                          capture_output=True, text=True, encoding="utf-8",
                          timeout=MEASURE_TIMEOUT, check=False)


def measured(path: Path, config: Path, *options: str) -> Json:
    """measure.py's JSON document for ``path``, with the settings file
    ``config`` and window 2."""
    done = run_measure(str(path), "--config", str(config), *MASKING_ON, *options, "--json")
    assert done.returncode == 0, done.stderr
    return as_object(json.loads(done.stdout))


def without_recording(value: object) -> object:
    """``value`` with every ``file`` and ``recorded`` key taken out, at any depth."""
    if isinstance(value, dict):
        return {k: without_recording(v) for k, v in value.items() if k not in RECORDING_KEYS}
    if isinstance(value, list):
        return [without_recording(item) for item in value]
    return value


def _empty_config(tmp_path: Path) -> Path:
    """An empty settings file: the repository's mitm.toml must not count."""
    config = tmp_path / "obsmask.toml"
    config.write_text("", encoding="utf-8")
    return config


def _check_same_figures(on: Json, off: Json, requests: int) -> tuple[Json, Json]:
    """The two documents agree on every figure; the recordings differ as
    they should. Returns each one's only conversation."""
    assert without_recording(on) == without_recording(off)
    # The proxy's own bill is what it did: it sent fewer tokens masking.
    assert re.search(r"; [1-9][0-9,]* input tokens not sent", str(on["proxy_bill"]))
    assert "; 0 input tokens not sent" in str(off["proxy_bill"])
    [on_input], [off_input] = as_list(on["inputs"]), as_list(off["inputs"])
    on_recorded = as_object(as_object(on_input)["recorded"])
    off_recorded = as_object(as_object(off_input)["recorded"])
    assert as_object(on_input)["conversation_requests"] == requests
    # Masked when recorded, and read back from the backup; the other not at all.
    assert 0 < as_object(on_recorded)["masked_when_recorded"] == on_recorded["from_backup"]
    assert off_recorded["masked_when_recorded"] == off_recorded["from_backup"] == 0
    # Every request carries the provider's own figures, in both.
    assert on_recorded["with_provider_usage"] == off_recorded["with_provider_usage"] == requests
    [on_conversation] = as_list(on["conversations"])
    [off_conversation] = as_list(off["conversations"])
    on_c, off_c = as_object(on_conversation), as_object(off_conversation)
    assert on_c["requests"] == on_c["recorded_requests"] == requests
    # The replay masks: with obsmask the request holds fewer tokens.
    none = as_object(as_object(on_c["bill"])["none"])
    assert isinstance(none["ratio"], float) and none["ratio"] < 1
    return on_c, off_c


def _check_provider_figures(on: Json, off: Json) -> None:
    """The provider's figures sit next to the same estimates; with masking on
    it received (and billed) fewer tokens."""
    on_provider = as_object(as_object(on["recorded"])["provider"])
    off_provider = as_object(as_object(off["recorded"])["provider"])
    for key in ("estimate_without_obsmask", "estimate_with_obsmask", "paired_with_the_replay"):
        assert on_provider[key] == off_provider[key], key
    assert on_provider["paired_with_the_replay"] == on_provider["requests"]
    assert on_provider["masked_when_recorded"] > 0 == off_provider["masked_when_recorded"]
    on_prompt = as_object(on_provider["provider"])["prompt_tokens"]
    off_prompt = as_object(off_provider["provider"])["prompt_tokens"]
    assert isinstance(on_prompt, int) and isinstance(off_prompt, int)
    assert 0 < on_prompt < off_prompt


# Chat Completions --------------------------------------------------------------------

CHAT_AGENT = CLIENTS / "chat_agent.py"
CHAT_TOOL_TURNS = 10
CHAT_STREAM_TURNS = (3, 7)  # 0-based requests answered as a stream, with the usage chunk
BYTES_PER_TOKEN = 4
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128


class ChatProvider:
    """An OpenAI-compatible server for chat_agent.py: below CHAT_TOOL_TURNS
    tool turns it calls read_file (even turns) or run_tests (odd ones),
    then answers with text. Its usage is computed from the bytes received:
    the prompt is the body / 4, the cached part the longest prefix shared
    with an earlier body / 4, in OpenAI's steps (so a masked body is cheaper
    and a changed prefix is read from the cache no more)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()

    def __call__(self, recorded: Recorded) -> Answer:
        if recorded.method == "GET" and recorded.path.startswith("/release/"):
            return Answer(headers={"content-type": "text/plain"}, body=b"released")
        if recorded.method != "POST" or not recorded.path.endswith("/chat/completions"):
            return Answer(status=404, body=b'{"error": {"message": "not found"}}')
        request = as_object(json.loads(recorded.body))
        messages = [as_object(m) for m in as_list(request["messages"])]
        turn = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        usage = self._usage(recorded.body)
        head: Json = {"id": f"chatcmpl-{turn}", "created": 1_700_000_000 + turn,
                      "model": request["model"]}
        call: Json | None = None
        if turn < CHAT_TOOL_TURNS:
            name, arguments = (("read_file", {"path": f"src/stage_{turn}.py"}) if turn % 2 == 0
                               else ("run_tests", {"selector": f"tests/test_{turn}.py"}))
            call = {"id": f"call_{turn}", "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)}}
        message: Json = ({"role": "assistant", "content": None, "tool_calls": [call]} if call
                         else {"role": "assistant", "content": f"Done after {turn} tool turns."})
        finish = "tool_calls" if call else "stop"
        if not request.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish}
            body = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
            return Answer(body=json.dumps(body).encode())
        delta = {**message, "tool_calls": [{"index": 0, **call}]} if call else message
        chunks = [
            {**head, "object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**head, "object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**head, "object": "chat.completion.chunk", "choices": [], "usage": usage},
        ]
        events: list[bytes] = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
        return Answer(headers={"content-type": "text/event-stream"},
                      body=[*events, b"data: [DONE]\n\n"])

    def _usage(self, body: bytes) -> Json:
        with self._lock:
            earlier = list(self.bodies)
            self.bodies.append(body)
        shared = max((common_prefix_length(body, e) for e in earlier), default=0)
        prompt, common = len(body) // BYTES_PER_TOKEN, shared // BYTES_PER_TOKEN
        cached = (0 if common < CACHE_MIN_TOKENS else CACHE_MIN_TOKENS + CACHE_STEP_TOKENS * (
            (common - CACHE_MIN_TOKENS) // CACHE_STEP_TOKENS))
        return {"prompt_tokens": prompt, "completion_tokens": 11, "total_tokens": prompt + 11,
                "prompt_tokens_details": {"cached_tokens": cached}}


def _record_chat_session(tmp_path: Path, name: str, *options: str) -> Path:
    flows = tmp_path / f"{name}.mitm"
    with recording_server(ChatProvider()) as server:
        arguments = [*recording_arguments(server.url, _empty_config(tmp_path), flows), *options]
        with running_mitmdump(arguments, REPO, tmp_path / f"confdir-{name}") as proxy:
            report = as_object(run_agent(CHAT_AGENT, f"http://127.0.0.1:{proxy.port}/v1",
                                         server.url, CHAT_TOOL_TURNS, CHAT_STREAM_TURNS, proxy))
            assert len(as_list(report["requests"])) == CHAT_TOOL_TURNS + 1
            _assert_clean(proxy)
    return flows


def _assert_clean(proxy: MitmdumpProcess) -> None:
    output = proxy.output()
    assert "Traceback" not in output and "internal error" not in output, output


@needs_clients
@pytest.mark.e2e
def test_a_chat_session_recorded_through_obsmask_measures_as_one_recorded_without_it(
        tmp_path: Path) -> None:
    """The openai SDK over 10 tool turns (two answers streamed): measure.py
    on the flows recorded with masking on and with it off gives the same
    figures; the provider's own figures, in both files, show it received
    fewer tokens when obsmask masked."""
    on_file = _record_chat_session(tmp_path, "masked", *MASKING_ON)
    off_file = _record_chat_session(tmp_path, "unmasked", *MASKING_OFF)
    config = _empty_config(tmp_path)
    on, off = measured(on_file, config), measured(off_file, config)
    on_conversation, off_conversation = _check_same_figures(on, off, CHAT_TOOL_TURNS + 1)
    assert on_conversation["format"] == "chat"
    _check_provider_figures(on_conversation, off_conversation)


# Anthropic Messages ------------------------------------------------------------------

PROMPT_MARKER = "OBSMASK-E2E-MEASURE"
PROMPT = f"{PROMPT_MARKER}: the build fails; run the steps you are given and report."
FINAL = "Scripted build done."
# The size of each tool result, in characters.
SIZES = (9_000, 400, 6_000, 12_000, 1_500, 300, 9_000, 8_000, 600, 10_000)
ANTHROPIC_STREAM_TURNS = (2, 6, 10)


def _record_anthropic_session(tmp_path: Path, name: str, *options: str) -> Path:
    flows = tmp_path / f"{name}.mitm"
    commands = [f"emit {size} step{number}" for number, size in enumerate(SIZES)]
    with scripted_anthropic(PROMPT_MARKER, commands, FINAL) as scripted:
        arguments = [*recording_arguments(scripted.url, _empty_config(tmp_path), flows), *options]
        with running_mitmdump(arguments, REPO, tmp_path / f"confdir-{name}") as proxy:
            clients_python = os.environ.get("OBSMASK_CLIENTS_PYTHON")
            assert clients_python is not None  # needs_clients skips otherwise
            report = run_shell_agent(clients_python, f"http://127.0.0.1:{proxy.port}", PROMPT,
                                     stream_turns=ANTHROPIC_STREAM_TURNS, breakpoint="last",
                                     log=proxy.output)
            assert len(as_list(report["requests"])) == len(SIZES) + 1
            _assert_clean(proxy)
    return flows


@needs_clients
@pytest.mark.e2e
def test_an_anthropic_session_recorded_through_obsmask_measures_as_one_recorded_without_it(
        tmp_path: Path) -> None:
    """The anthropic SDK over 10 tool turns (three answers streamed), the
    provider reporting cache reads and writes: the same figures from both
    recordings; the text report gives the bill first, says the masked flows
    were read from their backup, and puts the provider's figures (its cache
    writes too) next to the estimate."""
    on_file = _record_anthropic_session(tmp_path, "masked", *MASKING_ON)
    off_file = _record_anthropic_session(tmp_path, "unmasked", *MASKING_OFF)
    config = _empty_config(tmp_path)
    on, off = measured(on_file, config), measured(off_file, config)
    on_conversation, off_conversation = _check_same_figures(on, off, len(SIZES) + 1)
    assert on_conversation["format"] == "anthropic"
    _check_provider_figures(on_conversation, off_conversation)
    provider = as_object(as_object(as_object(on_conversation["recorded"])["provider"])["provider"])
    written = provider["cache_creation_tokens"]
    assert isinstance(written, int) and written > 0

    done = run_measure(str(on_file), "--config", str(config), *MASKING_ON)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.index("The bill, in input tokens at the base input price") < text.index(
        "input tokens sent:") < text.index("The provider's own figures")
    for model in ("anthropic", "openai", "openai_50", "none"):
        assert f"\n  {model} " in text, model
    assert "masked by obsmask when recorded: read from their backup" in text
    assert 'obsmask\'s decisions used price_model = "none"' in text
    assert "written to it" in text and "(the replay's cache: Anthropic's rule)" in text


# The saved flows of fixtures/flows ---------------------------------------------------


@pytest.mark.parametrize("name", ["chat", "anthropic", "responses"])
def test_on_the_saved_flows_the_headline_is_the_cache_benchmarks_replay_of_their_bodies(
        tmp_path: Path, name: str) -> None:
    """fixtures/flows/<format>_session.mitm (three requests of one session,
    a GET and a body that is not JSON): one conversation, whose bill under
    each price model, without and with obsmask (window 2), is what
    bench_cache's replay gives for the same bodies, and so is the total."""
    path = REPO / "fixtures" / "flows" / f"{name}_session.mitm"
    document = measured(path, _empty_config(tmp_path))
    [session] = load_input(path)
    policies = {"none": MaskPolicy(enabled=False),
                "obsmask": MaskPolicy(window_turns=WINDOW_TURNS)}
    expected = session_figures(session, policies, MessageTokens(load_encoder()))
    [conversation] = [as_object(c) for c in as_list(document["conversations"])]
    assert (conversation["format"], conversation["requests"]) == (name, expected["requests"])
    assert conversation["recorded_requests"] == 3
    total = as_object(as_object(document["total"])["bill"])
    for model, described in as_object(document["price_models"]).items():
        replay_model = as_object(described)["replay_model"]
        assert isinstance(replay_model, str)
        bill = as_object(as_object(conversation["bill"])[model])
        assert bill["without_obsmask"] == expected["policies"]["none"]["cost"][replay_model]
        assert bill["with_obsmask"] == expected["policies"]["obsmask"]["cost"][replay_model]
        assert bill["ratio"] == expected["policies"]["obsmask"]["ratio"][replay_model]
        assert as_object(total[model]) == bill
    [summary] = [as_object(i) for i in as_list(document["inputs"])]
    assert summary["skipped"] == {f"not a JSON {_title(name)} request": 1}


def _title(name: str) -> str:
    return {"chat": "OpenAI Chat Completions", "anthropic": "Anthropic Messages",
            "responses": "OpenAI Responses"}[name]


SESSIONS = tuple(REPO / "fixtures" / "flows" / f"{name}_session.mitm"
                 for name in ("chat", "anthropic", "responses"))


def test_held_out_conversations_are_named_and_the_total_gives_the_bill_of_the_others(
        tmp_path: Path) -> None:
    """holdout_percent 70: of the three saved sessions only the chat one's
    first user message falls in the lowest 70 buckets (66; 88 and 81 for
    the others). It is replayed unmasked, as the proxy leaves it, named as
    held out, and kept in the total; the total also gives the bill of the
    two others alone, and the text's headline says how many were held out."""
    options = ("--set", "obsmask_holdout_percent=70")
    document = measured(SESSIONS[0], _empty_config(tmp_path), *options)  # one, held out
    [alone] = [as_object(c) for c in as_list(document["conversations"])]
    assert alone["held_out"] is True
    assert as_object(as_object(alone["bill"])["none"])["ratio"] == 1.0
    document = as_object(json.loads(run_measure(
        *map(str, SESSIONS), "--config", str(_empty_config(tmp_path)), *MASKING_ON, *options,
        "--json").stdout))
    conversations = [as_object(c) for c in as_list(document["conversations"])]
    assert [(c["format"], c["held_out"]) for c in conversations] == [
        ("chat", True), ("anthropic", False), ("responses", False)]
    total = as_object(document["total"])
    assert total["held_out_conversations"] == 1
    others = as_object(total["not_held_out"])
    assert others["conversations"] == 2
    for model, bill in as_object(others["bill"]).items():
        summed = 0.0
        for conversation in conversations[1:]:
            value = as_object(as_object(conversation["bill"])[model])["without_obsmask"]
            assert isinstance(value, float)
            summed += value
        assert as_object(bill)["without_obsmask"] == pytest.approx(summed, abs=0.2), model
        whole = as_object(as_object(total["bill"])[model])["without_obsmask"]
        assert isinstance(whole, float) and whole > summed
    done = run_measure(*map(str, SESSIONS), "--config", str(_empty_config(tmp_path)),
                       *MASKING_ON, *options)
    assert "3 conversations, 1 of them held out," in done.stdout
    assert "The 2 conversations not held out, alone:" in done.stdout
    assert done.stdout.count("; held out (holdout_percent)") == 1


def test_flows_it_cannot_measure_honestly_are_counted_as_skipped_with_the_reason(
        tmp_path: Path) -> None:
    """A masked flow on a route the settings in force do not read (obsmask
    recorded its format), and a masked flow saved without its backup: each
    skipped and said so, not dropped or read as the client's; a figure
    beyond 2**53 in the provider's usage is read as not reported."""
    fixture = REPO / "fixtures" / "flows" / "chat_session.mitm"
    bodies = [flow.body for flow in recorded_requests(fixture) if flow.method == "POST"]
    masked = {"action": "masked", "format": "chat"}
    path = write_flows(tmp_path / "session.mitm", [
        post_flow("/llm/chat", bodies[0] or b"", masked=b"{}", metadata=masked),
        post_flow("/v1/chat/completions", bodies[1] or b"", metadata=masked),
        *(post_flow("/v1/chat/completions", body or b"", metadata={
            "action": "unchanged", "format": "chat",
            "provider_usage": {"input_tokens": 10**400, "cached_input_tokens": 5}})
          for body in bodies[2:3]),
    ])
    document = measured(path, _empty_config(tmp_path))
    [summary] = [as_object(i) for i in as_list(document["inputs"])]
    assert summary["skipped"] == {
        "recorded by obsmask as an OpenAI Chat Completions request, on a route the settings "
        "in force do not read as one (obsmask_*_route, obsmask_hosts)": 1,
        "masked when recorded, and its original is not in the flow (no backup, or one that "
        "cannot be read)": 1,
    }
    assert summary["conversation_requests"] == 1
    [conversation] = [as_object(c) for c in as_list(document["conversations"])]
    assert as_object(conversation["recorded"])["provider"] is None
    assert str(10**20) not in json.dumps(document)


def test_without_config_the_settings_file_of_the_current_directory_is_read(
        tmp_path: Path) -> None:
    (tmp_path / "mitm.toml").write_text("[observation_masking.schema1]\nwindow_turns = 3\n",
                                        encoding="utf-8")
    flows = REPO / "fixtures" / "flows" / "chat_session.mitm"
    done = run_measure(str(flows), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    settings = as_object(as_object(json.loads(done.stdout))["settings"])
    assert settings["source"] == "mitm.toml"
    assert as_object(settings["policy"])["window_turns"] == 3


@pytest.mark.parametrize(("options", "line"), [
    (("--set", "obsmask_window_turn=2"),
     r"measure: unknown option obsmask_window_turn \(did you mean obsmask_window_turns\?\)"),
    # mitmproxy's own words (11 and 12 word them differently).
    (("--set", "obsmask_window_turns=two"),
     r"measure: --set obsmask_window_turns=two: [^\n]*(N|n)ot an integer: two"),
    (("--set", "obsmask_batch_turns=0"), r"measure: obsmask_batch_turns: must be 1 or more, got 0"),
    (("--profile", "missing"),
     r"measure: mitm.toml: no profile 'missing' \(profiles: no_cache, spec\)"),
])
def test_a_wrong_option_stops_with_one_line_and_status_2(options: tuple[str, ...],
                                                         line: str) -> None:
    done = run_measure("fixtures/flows/chat_session.mitm", *options)
    assert (done.returncode, done.stdout) == (2, "")
    assert re.fullmatch(line + "\n", done.stderr), done.stderr


def test_an_input_it_cannot_read_stops_with_one_line(tmp_path: Path) -> None:
    done = run_measure(str(tmp_path / "missing.mitm"))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"measure: {tmp_path / 'missing.mitm'}: cannot be read " \
                          "(No such file or directory)\n"
