"""A real mitmdump with obsmask: start-up errors, bad bodies, replayed files.

Every process is started on 127.0.0.1 with a bounded time, and stopped.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mitmproxy import io
from mitmproxy.flow import Flow

from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import FORMATS
from support.chat import body, conversation
from support.chat_masking import mask_old_tool_results
from support.processes import (
    REPO,
    START_TIMEOUT,
    MitmdumpProcess,
    running_mitmdump,
    stop_process,
)
from support.recording_server import Answer, recording_server

pytestmark = pytest.mark.e2e

FLOWS = REPO / "fixtures" / "flows"
REPLAY_FIXTURE = FLOWS / "chat_session.mitm"


def ok(_request: object) -> Answer:
    return Answer(body=b'{"ok": true}')


def post(port: int, payload: bytes, path: str = "/v1/chat/completions") -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request("POST", path, body=payload, headers={"content-type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def write_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "obsmask.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


# Start-up errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "options", "message"),
    [
        ("[observation_masking.schema1\nwindow_turns = 3\n", [], "not valid TOML"),
        ("[observation_masking.schema1]\nwindow_turns = -1\n", [],
         "[observation_masking.schema1] window_turns: must be 0 or more, got -1"),
        ("[observation_masking.schema1]\nkeep_errors = 'yes'\n", [],
         "keep_errors: must be a boolean"),
        ("", ["--set", "obsmask_window_turns=-4"], "obsmask_window_turns: must be 0 or more"),
        ("", ["--set", "obsmask_window_turns=ten"], "--set obsmask_window_turns=ten"),
        ("", ["--set", "obsmask_enabled=maybe"], "--set obsmask_enabled=maybe"),
        ("", ["--set", "obsmask_window_turns=3", "--set", "obsmask_window_turns=4"],
         "--set obsmask_window_turns=3,4"),
        ("", ["--set", "obsmask_placeholder_template={oops}"], "unknown field {oops}"),
        (None, [], "nope.toml: configuration file not found"),
    ],
    ids=["toml-syntax", "negative-window", "wrong-type", "negative-option", "not-an-integer",
         "not-a-boolean", "repeated-option", "bad-template", "missing-explicit-file"],
)
def test_bad_configuration_stops_start_up(tmp_path, config, options, message):
    """Invalid values (a negative window, an unknown placeholder field, a TOML
    syntax error, a wrong type) stop start-up with one clear message naming
    the key and the file."""
    path = str(tmp_path / "nope.toml") if config is None else write_config(tmp_path, config)
    assert_start_up_fails(tmp_path, path, options, message, names_file=config is not None)


@pytest.mark.parametrize(
    ("config", "options", "message"),
    [
        ("[mcp_gateway.masking]\nhead_chars = 3000\n", [],
         "head_chars + tail_chars (3000 + 2000) must not exceed max_chars (4000)"),
        ("", ["--set", "mcpmask_max_chars=big"], "--set mcpmask_max_chars=big"),
        ("[mcp_gateway.servers]\nfs = 'ftp://127.0.0.1:8004'\n", [],
         "[mcp_gateway.servers] fs: 'ftp://127.0.0.1:8004' is not an http:// or https:// URL"),
    ],
    ids=["toml-pair", "not-an-integer", "server-url"],
)
def test_bad_mcp_configuration_stops_start_up(tmp_path, config, options, message):
    """MCP truncation's settings are checked at start-up like the others (e.g.
    head_chars + tail_chars > max_chars is an error). The other invalid
    values are refused by the same configure
    (tests/addons/test_mcp_addon.py)."""
    path = write_config(tmp_path, config)
    assert_start_up_fails(tmp_path, path, options, message, names_file=bool(config))


def assert_start_up_fails(
    tmp_path: Path, path: str, options: list[str], message: str, names_file: bool
) -> None:
    """mitmdump with this settings file and these options exits non-zero,
    saying ``message`` (and the file's path, for an error in the file)."""
    proxy = MitmdumpProcess(["--set", f"obsmask_config={path}", *options], tmp_path, tmp_path)
    try:
        code = proxy.wait_for_exit()
    finally:
        proxy.stop()
    output = proxy.output()
    assert code != 0, output
    # One line says it, the last one, before the proxy ever listens: no
    # traceback, no "listening", no "Error logged during startup".
    said = [line for line in proxy.lines if message in line]
    assert len(said) == 1 and proxy.lines[-1] == said[0], output
    assert "Traceback" not in output and "listening" not in output, output
    if names_file and not options:
        assert path in said[0]


MISSPELLED = "[obsmask]\nenabled = true\n\n[observation_masking.schema]\nwindow_turns = 3\n"


@pytest.mark.parametrize("named", [True, False], ids=["named-file", "current-directory"])
def test_a_misspelled_section_stops_start_up_with_the_file_its_line_and_the_closest_name(
        tmp_path, named):
    """[observation_masking.schema] for schema1 is not read as an absent
    table (the built-in window, with "(settings: mitm.toml)"): mitmdump
    exits before it listens, saying the file, the line and the table
    meant, whether the file is named or is ./mitm.toml."""
    (tmp_path / "mitm.toml").write_text(MISSPELLED, encoding="utf-8")
    options = ["--set", f"obsmask_config={tmp_path / 'mitm.toml'}"] if named else []
    where = f"{tmp_path / 'mitm.toml'}:4" if named else "mitm.toml:4"
    started = time.monotonic()
    proxy = MitmdumpProcess(options, tmp_path, tmp_path / "conf")
    try:
        code = proxy.wait_for_exit()
    finally:
        proxy.stop()
    output = proxy.output()
    assert code != 0 and time.monotonic() - started < START_TIMEOUT, output
    # The last line, after mitmdump's time stamp.
    assert proxy.lines[-1].endswith(
        f"] obsmask: {where}: unknown table [observation_masking.schema] "
        "(did you mean [observation_masking.schema1]?)"), output
    assert "Traceback" not in output and "listening" not in output, output


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--set", "obsmask_window=3"],
         "obsmask: unknown option obsmask_window (did you mean obsmask_window_turns?)"),
        (["--set", "mcpmask_max_char=100"],
         "obsmask: unknown option mcpmask_max_char (did you mean mcpmask_max_chars?)"),
        (["--set", "mcpmask_gateway_allow_clients=everyone"],
         "'everyone' is not an IP address or network"),
    ],
    ids=["obsmask-typo", "mcpmask-typo", "bad-network"],
)
def test_an_unknown_option_stops_start_up_with_the_closest_name(tmp_path, options, message):
    """A misspelt option is not ignored: mitmproxy keeps it for a script that
    may come later, and obsmask refuses it once its addons have loaded."""
    path = write_config(tmp_path, "")
    assert_start_up_fails(tmp_path, path, options, message, names_file=False)


@pytest.mark.parametrize(
    ("arguments", "host"),
    [([], "127.0.0.1"), (["--set", "listen_host=127.0.0.2"], "127.0.0.2")],
    ids=["default", "chosen"],
)
def test_the_readme_proxy_command_listens_on_the_loopback(tmp_path, arguments, host):
    """scripts/proxy.py adds --listen-host 127.0.0.1 unless the address is
    chosen: mitmproxy alone listens on every interface."""
    process = subprocess.Popen(
        [sys.executable, str(REPO / "scripts" / "proxy.py"), "--mode",
         "reverse:http://127.0.0.1:9", "-p", "0", "--set", f"confdir={tmp_path}", *arguments],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, encoding="utf-8", errors="replace",
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: list[str] = []
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT
        # Bounded: mitmdump prints a line at start-up or exits; the deadline
        # is checked after each line (readline returns "" when it exits).
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line or "listening at" in line:
                lines.append(line)
                break
            lines.append(line)
    finally:
        stop_process(process)
    assert f"listening at {host}:" in lines[-1], "".join(lines)


def test_good_configuration_starts_and_says_what_it_does(tmp_path):
    path = write_config(tmp_path, "[observation_masking.schema1]\nwindow_turns = 4\n")
    with running_mitmdump(["--set", f"obsmask_config={path}"], tmp_path, tmp_path) as proxy:
        line = proxy.wait_for(r"obsmask: conversation masking on").string
    assert "window 4 tool turns" in line and path in line


# Bad bodies ---------------------------------------------------------------------------

NESTED = b'{"messages": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"
BAD_BODIES = {
    "not-json": (b"model=gpt&messages=1", "not valid JSON"),
    "json-array": (json.dumps([{"role": "user"}]).encode(), "the JSON is not an object"),
    "messages-not-a-list": (json.dumps({"messages": {"0": "x"}}).encode(),
                            "'messages' is not a list"),
    "no-messages": (json.dumps({"model": "x", "input": "hi"}).encode(),
                    "the object has no 'messages'"),
    "invalid-utf8": (b'{"messages": [{"role": "tool", "content": "\xff\xfe"}]}',
                     "not valid UTF-8"),
    "deep-nesting": (NESTED, "nested too deeply"),
    "50MB-garbage": (os.urandom(1024) * (50 * 1024), "not valid UTF-8"),
}


def test_bad_bodies_pass_byte_for_byte_and_mitmdump_keeps_serving(tmp_path):
    """Not JSON, a JSON array, messages not a list, invalid UTF-8, 100 000
    levels of nesting, 50 MB of garbage: each passes through byte for byte
    with one log line, and mitmdump keeps serving."""
    config = write_config(tmp_path, "[observation_masking.schema1]\nwindow_turns = 1\n")
    with recording_server(ok) as server, running_mitmdump(
        ["--mode", f"reverse:{server.url}", "--set", f"obsmask_config={config}"],
        tmp_path,
        tmp_path,
    ) as proxy:
        for name, (payload, reason) in BAD_BODIES.items():
            start = len(proxy.lines)
            assert post(proxy.port, payload) == 200, name
            received = server.posts("/v1/chat/completions")[-1].body
            assert received == payload, name
            line = proxy.wait_for(r"obsmask: POST /v1/chat/completions forwarded unchanged",
                                  start=start)
            assert reason in line.string, (name, line.string)
            matching = [x for x in proxy.lines[start:] if "forwarded unchanged" in x]
            assert len(matching) == 1, (name, matching)

        # Still serving, and still masking.
        messages = conversation(turns=3)
        assert post(proxy.port, body(messages)) == 200
        masked = json.loads(server.posts("/v1/chat/completions")[-1].body)
        assert masked["messages"] == mask_old_tool_results(messages, MaskPolicy(window_turns=1))
        assert "Traceback" not in proxy.output()


# Replaying a saved file -------------------------------------------------------------------


@pytest.mark.parametrize("fmt_name", ["chat", "anthropic", "responses"])
def test_replayed_file_is_masked(tmp_path, fmt_name):
    """Flows read from a file (mitmdump -nr) are masked too: a saved .mitm file
    of each format from fixtures/ replayed through mitmdump -nr ... -s
    addons/obsmask.py -w OUT, and the written flows checked."""
    fmt = FORMATS[fmt_name]
    fixture = FLOWS / f"{fmt_name}_session.mitm"
    config = write_config(tmp_path, "[observation_masking.schema1]\nwindow_turns = 3\n")
    out = tmp_path / "out.mitm"
    proxy = MitmdumpProcess(
        ["-n", "-r", str(fixture), "-w", str(out), "--set", f"obsmask_config={config}"],
        tmp_path,
        tmp_path,
    )
    try:
        assert proxy.wait_for_exit() == 0, proxy.output()
    finally:
        proxy.stop()

    with open(fixture, "rb") as file:
        originals = list(io.FlowReader(file).stream())
    with open(out, "rb") as file:
        written = list(io.FlowReader(file).stream())
    assert [f.id for f in written] == [f.id for f in originals]

    policy = MaskPolicy(window_turns=3)
    masked_flows = 0
    for before, after in zip(originals, written, strict=True):
        if before.request.method != "POST":
            assert after.request.content == before.request.content
            assert "obsmask" not in after.metadata
            continue
        try:
            document = json.loads(before.request.content)
        except ValueError:
            assert after.request.content == before.request.content
            assert after.metadata["obsmask"]["action"] == "passed_through"
            continue
        expected = mask_items(document[fmt.list_member], policy, fmt)
        assert json.loads(after.request.content) == {**document, fmt.list_member: expected}
        assert expected != document[fmt.list_member]
        masked_flows += 1
        meta = after.metadata["obsmask"]
        assert meta["action"] == "masked" and meta["masked_tool_results"] > 0
        assert meta["format"] == fmt_name
        assert meta["token_encoding"] == "cl100k_base"
        assert meta["masked_tokens_before"] > meta["masked_tokens_after"] > 0
        assert after.marked and "masked" in after.comment
        # The original is in the saved flow: mitmweb can show and revert it.
        assert after.modified()
        after.revert()
        assert after.request.content == before.request.content
        # The answers recorded in the file are untouched.
        assert after.response.content == before.response.content
    assert masked_flows == 3


def replayed(tmp_path, *options: str) -> list[Flow]:
    out = tmp_path / "out.mitm"
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "proxy.py"), "-nr", str(REPLAY_FIXTURE),
         "-w", str(out), "--set", f"confdir={tmp_path}", *options],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    with open(out, "rb") as file:
        return list(io.FlowReader(file).stream())


def test_readme_replay_command_runs_the_same(tmp_path):
    """The replay recipe of the README, through scripts/proxy.py: every
    conversation request is planned and its bill names the model table's
    row. The session's model (deepseek-chat) is in no row, so it is billed
    under OpenAI's most cautious terms, where no move pays on these three
    requests; a row that bills it like GPT-5 (model_prices) lets masking
    pay."""
    planned = [f.metadata["obsmask"] for f in replayed(tmp_path)
               if "bill" in f.metadata.get("obsmask", {})]
    assert len(planned) == 3
    assert {p["bill"]["model_row"]["row"] for p in planned} == {"openai-unknown"}
    assert {p["action"] for p in planned} == {"unchanged"}
    priced = [f.metadata.get("obsmask", {}) for f in replayed(
        tmp_path, "--set", "obsmask_model_prices=deepseek-*|gpt-5")]
    assert sum(1 for p in priced if p.get("action") == "masked") >= 1
    assert {p["bill"]["model_row"]["row"] for p in priced if "bill" in p} == {"deepseek-*"}


# The provider's usage report ------------------------------------------------------------------


def test_provider_usage_is_recorded_for_buffered_and_streamed_answers(tmp_path):
    """Each flow records the cached input tokens the provider reported, from a
    buffered answer and from the last event of a streamed one."""
    usage = {"prompt_tokens": 9000, "completion_tokens": 5,
             "prompt_tokens_details": {"cached_tokens": 8064}}
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}

    def answer(request: object) -> Answer:
        if b'"stream": true' not in request.body:
            return Answer(body=json.dumps({"id": "c", "choices": [], "usage": usage}).encode())
        events = [f"data: {json.dumps(chunk)}\n\n".encode(),
                  f"data: {json.dumps({**chunk, 'choices': [], 'usage': usage})}\n\n".encode(),
                  b"data: [DONE]\n\n"]
        return Answer(headers={"content-type": "text/event-stream"}, body=events)

    config = write_config(tmp_path, "")
    out = tmp_path / "out.mitm"
    with recording_server(answer) as server, running_mitmdump(
        ["--mode", f"reverse:{server.url}", "--set", f"obsmask_config={config}", "-w", str(out)],
        tmp_path, tmp_path,
    ) as proxy:
        messages = conversation(turns=2)
        assert post(proxy.port, body(messages)) == 200
        assert post(proxy.port, body(messages, stream=True)) == 200
        proxy.wait_for(r"provider reported 9,000 input tokens, 8,064 read", start=0)
    with open(out, "rb") as file:
        flows = list(io.FlowReader(file).stream())
    assert len(flows) == 2
    for flow in flows:
        assert flow.metadata["obsmask"]["provider_usage"] == {
            "input_tokens": 9000, "cached_input_tokens": 8064, "output_tokens": 5,
        }


LISTENER_SCRIPT = '''
from pathlib import Path

OUT = Path(__file__).with_name("add_log.txt")


def add_log(entry):
    with OUT.open("a", encoding="utf-8") as out:
        out.write(entry.msg + "\\n")
'''


def test_a_script_of_the_user_s_on_the_deprecated_add_log_hook_still_gets_obsmask_s_lines(
        tmp_path):
    """obsmask's records skip mitmproxy's add_log event only while no addon
    has the hook: a script loaded beside obsmask that has it gets them."""
    listener = tmp_path / "listener.py"
    listener.write_text(LISTENER_SCRIPT, encoding="utf-8")
    received = tmp_path / "add_log.txt"
    config = write_config(tmp_path, "[observation_masking.schema1]\nwindow_turns = 1\n")
    with recording_server(ok) as server, running_mitmdump(
        ["--mode", f"reverse:{server.url}", "--set", f"obsmask_config={config}",
         "-s", str(listener)],
        tmp_path, tmp_path,
    ) as proxy:
        assert post(proxy.port, body(conversation(turns=3))) == 200
        proxy.wait_for(r"obsmask: POST /v1/chat/completions: masked", start=0)
        deadline = time.monotonic() + 10
        while "obsmask: POST /v1/chat/completions: masked" not in (
                received.read_text(encoding="utf-8") if received.exists() else ""):
            assert time.monotonic() < deadline, "the script's add_log got no obsmask line"
            time.sleep(0.05)
