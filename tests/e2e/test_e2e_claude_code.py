"""End to end: the real Claude Code program (``claude -p``, Anthropic Messages,
streamed) through a real mitmdump with obsmask, driving a scripted local model.

The scripted server (tests/support/scripted_anthropic.py) plays the model:
ten turns each calling Claude Code's ``Bash`` tool (found in the request's
``tools``) with a command whose output is large (``seq``, ``cat`` of a file
written in the agent's working directory...), one small (``wc -l``), one
that fails (``cat missing_file.txt``, which Claude Code reports with
``"is_error": true``), then a final text answer. Claude Code runs the
commands for real, in a fresh folder, with no network: its only server is
the scripted one (tests/support/claude_code.py: a fresh ``HOME``, no
non-essential traffic, proxies pointing at a trap that records any attempt
to reach another host).

The same task runs twice in the same folder, Claude Code's identity and
session id fixed: directly against the server, then through ``mitmdump
--mode reverse:SERVER`` with obsmask (window of 2 tool turns, the built-in
defaults otherwise: no cache gate), its flows written with ``-w``. Both with
Claude Code's default model and with ``claude-sonnet-4-5``, whose requests
differ: the system reminders sit in the first user message, and Claude Code
appends reminders to each tool result, among them the tokens left, which it
computes from the usage the provider reported. Checked:

- Claude Code finishes the same way both times: exit code 0, the same final
  answer, the same tool calls, run with the same outputs; it asks the server
  for nothing but the task's streamed ``POST /v1/messages?beta=true``;
- what it sent through the proxy (each flow's original request, its backup)
  is byte for byte what it sent directly, but the date and the tokens left
  (more through obsmask: the provider bills fewer);
- what the server received is that body with the old ``Bash`` results
  replaced by the placeholder (reminders appended to them included), every
  other byte unchanged, exactly as ``mask_items`` (the addon's own model) and
  the window rule recomputed here say, on the body sent through the proxy
  and on the one sent directly; the failed command's result is never masked;
- each ``/v1/messages`` flow carries the usage the server reported in its
  stream, and mitmdump logged every masking and every usage report.

The figures (requests masked, bytes of the last request before and after,
usage per request, run times) are printed (``pytest -s`` shows them).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from mitmproxy import http, io

from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import ANTHROPIC
from obsmask_core.conversation.usage.provider_usage import ProviderUsage
from support.claude_code import ClaudeRun, claude_executable, prepare_folder, run_claude
from support.flow_files import flows_in_answer_order, original_content
from support.json_values import as_list, as_object
from support.processes import REPO, running_mitmdump, wait_for_lines
from support.recording_server import keep_bodies
from support.scripted_anthropic import Served, scripted_anthropic
from support.splices import compact, splice_problems
from support.sse import sse_events
from support.usage import read as read_usage

pytestmark = pytest.mark.e2e

Json = dict[str, object]

PROMPT_MARKER = "OBSMASK-E2E-TASK"
PROMPT = f"{PROMPT_MARKER}: run the shell steps the model gives you, then report."
BIG_FILE = "big_file.txt"
BIG_TEXT = "".join(
    f"line {i:03d}: the quick brown fox jumps over the lazy dog\n" for i in range(300)
)
FAILING = "cat missing_file.txt"
SMALL = "wc -l big_file.txt"
COMMANDS = [
    "seq 1 3000",
    f"cat {BIG_FILE}",
    FAILING,
    "seq 3001 6000",
    SMALL,
    f"sort -r {BIG_FILE}",
    "seq 6001 9000",
    f"nl {BIG_FILE}",
    "seq 9001 12000",
    f"grep -n fox {BIG_FILE}",
]
FINAL = "Scripted task done: 10 shell commands run, one failed (missing_file.txt)."
WINDOW_TURNS = 2
POLICY = MaskPolicy(window_turns=WINDOW_TURNS)
PLACEHOLDER = (
    "[Observation masquée: résultat d'outil ancien (tool_call_id={id}, outil=Bash, chars={chars})]"
)
PLACEHOLDER_START = "[Observation masquée: "
# Claude Code's default model (none named), and one whose requests differ:
# the system reminders in the first user message, and each tool result
# followed by reminders (the tokens left, computed from the provider's usage).
MODELS = ["default", "claude-sonnet-4-5"]
# Only the shell tool may run, without asking (-p cannot ask anyway);
# --dangerously-skip-permissions is refused to root.
CLAUDE_ARGUMENTS = ["--allowedTools", "Bash", "--max-turns", str(len(COMMANDS) + 3)]
# What may differ between two runs of Claude Code: the date, and the tokens
# left that it computes from the usage the provider reported (less through
# obsmask).
DATE = re.compile(rb"Today's date is \d{4}-\d{2}-\d{2}")
TOKENS_LEFT = re.compile(rb"<total_tokens>(\d+) tokens left</total_tokens>")
CHARS = re.compile(rb"chars=\d+")
REMINDERS = re.compile(r"(\s*<system-reminder>.*?</system-reminder>)+\s*$", re.DOTALL)


@dataclass
class Session:
    """One run of the task: Claude Code's, and what the server saw."""

    model: str
    run: ClaudeRun
    served: list[Served]
    task: list[Served]  # the requests of the task's conversation, in order
    flows: list[http.HTTPFlow]  # through the proxy: mitmdump's flows
    log: str


# Reading the bodies ------------------------------------------------------------------






def _body(raw: bytes) -> Json:
    return as_object(json.loads(raw))


@dataclass(frozen=True)
class Result:
    """A tool result of a request, found without the addon's code."""

    message: int
    block: int
    call_id: str
    turn: int  # the tool turn that called it
    command: str
    value: object  # tool_result.content
    is_error: bool


def _calls(messages: list[object]) -> list[tuple[str, str, str]]:
    """(id, tool name, command) of every tool_use, in order."""
    out = []
    for message in map(as_object, messages):
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, list):
            for block in map(as_object, content):
                if block.get("type") == "tool_use":
                    command = as_object(block["input"]).get("command")
                    out.append((str(block["id"]), str(block["name"]), str(command)))
    return out


def _results(messages: list[object]) -> list[Result]:
    turns = {call_id: n for n, (call_id, _, _) in enumerate(_calls(messages))}
    commands = {call_id: command for call_id, _, command in _calls(messages)}
    out = []
    for m, message in enumerate(map(as_object, messages)):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for b, block in enumerate(map(as_object, content)):
            if block.get("type") == "tool_result":
                call_id = str(block["tool_use_id"])
                out.append(
                    Result(
                        m,
                        b,
                        call_id,
                        turns[call_id],
                        commands[call_id],
                        block.get("content"),
                        block.get("is_error") is True,
                    )
                )
    return out


def _value(messages: list[object], result: Result) -> object:
    blocks = as_list(as_object(messages[result.message])["content"])
    return as_object(blocks[result.block]).get("content")


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    return "\n".join(str(as_object(b).get("text", "")) for b in as_list(value))


def _normalized(raw: bytes) -> bytes:
    """A body with what may differ between two runs made equal: the date, and
    the tokens left (see TOKENS_LEFT)."""
    return TOKENS_LEFT.sub(b"<total_tokens>N tokens left</total_tokens>", DATE.sub(b"DATE", raw))


def _comparable(body: Json) -> bytes:
    """A masked body, compact, normalized, with the sizes in its placeholders
    made equal (they count the tokens left)."""
    return CHARS.sub(b"chars=N", _normalized(compact(body).encode()))


def _output(value: object) -> str:
    """The command's output in a result: its text without the system
    reminders Claude Code appends to it."""
    return REMINDERS.sub("", _text(value))


def _placeholder(result: Result) -> str:
    return PLACEHOLDER.format(id=result.call_id, chars=len(_text(result.value)))


def _tokens_left(raw: bytes) -> list[int]:
    return [int(m.group(1)) for m in TOKENS_LEFT.finditer(raw)]


# The two runs ------------------------------------------------------------------------


def _run_task(root: Path, base_url: str, model: str) -> ClaudeRun:
    work = prepare_folder(root)
    (work / BIG_FILE).write_text(BIG_TEXT, encoding="utf-8")
    arguments = [*CLAUDE_ARGUMENTS, *([] if model == "default" else ["--model", model])]
    return run_claude(root, base_url, PROMPT, arguments)


@pytest.fixture(scope="module", params=MODELS)
def sessions(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Session, Session]:
    """The task run directly, then through mitmdump with obsmask, in the same
    folder (moved aside after the first run), with one model."""
    claude_executable()  # skips, saying why, when Claude Code is not installed
    model = str(request.param)
    base = tmp_path_factory.mktemp(f"claude_code_{model}")
    root = base / "agent"

    with scripted_anthropic(PROMPT_MARKER, COMMANDS, FINAL) as server:
        run = _run_task(root, server.url, model)
        direct = Session(model, run, list(server.served), server.task(), [], "")
    root.rename(base / "direct")
    keep_bodies(base / "direct" / "received", direct.served)

    config = base / "obsmask.toml"
    config.write_text("")  # the built-in defaults: the repository's mitm.toml must not count
    flows_file = base / "flows.mitm"
    with scripted_anthropic(PROMPT_MARKER, COMMANDS, FINAL) as server:
        arguments = [
            "--mode",
            f"reverse:{server.url}",
            "--set",
            f"obsmask_config={config}",
            "--set",
            f"obsmask_window_turns={WINDOW_TURNS}",
            "-w",
            str(flows_file),
        ]
        with running_mitmdump(arguments, REPO, base / "confdir") as proxy:
            proxy.wait_for(rf"conversation masking on: window {WINDOW_TURNS} tool turns")
            run = _run_task(root, f"http://127.0.0.1:{proxy.port}", model)
            # Every answer has ended; let mitmdump log each usage report.
            wait_for_lines(proxy, r"obsmask: provider reported", len(server.served), 10.0)
        proxied_served = list(server.served)
        proxied_task = server.task()
        log = proxy.output()
    keep_bodies(root / "received", proxied_served)
    with open(flows_file, "rb") as file:
        flows = [f for f in io.FlowReader(file).stream() if isinstance(f, http.HTTPFlow)]
    return direct, Session(model, run, proxied_served, proxied_task, flows, log)


# The tests ---------------------------------------------------------------------------


def test_claude_code_finishes_the_task_the_same_way_directly_and_through_obsmask(
    sessions: tuple[Session, Session],
) -> None:
    for session in sessions:
        run = session.run
        assert run.returncode == 0, run.describe()
        assert run.outside == (), "Claude Code tried to reach another host than 127.0.0.1"
        report = run.result()
        assert report["is_error"] is False and report["subtype"] == "success", run.describe()
        assert report["result"] == FINAL
        assert report["num_turns"] == len(COMMANDS) + 1
        # One request of the task per step, in the script's order; nothing else.
        assert [s.step for s in session.task] == list(range(len(COMMANDS) + 1))
        assert all(s.stream for s in session.task), "Claude Code streams every turn"
        assert [s.kind for s in session.served] == ["task"] * len(session.task)
        assert {urlsplit(s.recorded.path).path for s in session.served} == {"/v1/messages"}
        # Every command was called with Claude Code's own shell tool, in order.
        last = as_list(_body(session.task[-1].recorded.body)["messages"])
        assert [(name, command) for _, name, command in _calls(last)] == [
            ("Bash", c) for c in COMMANDS
        ]
    direct, proxied = sessions
    assert proxied.run.result()["result"] == direct.run.result()["result"]

    # The commands really ran, and gave the same outputs both times (the last
    # request through the proxy is masked: its flow keeps the original).
    sent = as_list(_body(original_content(_task_flows(proxied)[-1]))["messages"])
    outputs = [(r.command, _output(r.value), r.is_error) for r in _results(sent)]
    results = _results(as_list(_body(direct.task[-1].recorded.body)["messages"]))
    assert [(r.command, _output(r.value), r.is_error) for r in results] == outputs
    by_command = {r.command: r for r in results}
    assert _output(by_command["seq 1 3000"].value) == "\n".join(map(str, range(1, 3001)))
    assert _output(by_command[f"cat {BIG_FILE}"].value) == BIG_TEXT.rstrip("\n")
    assert _output(by_command[SMALL].value) == f"300 {BIG_FILE}"
    failed = by_command[FAILING]
    assert failed.is_error
    assert _output(failed.value) == "Exit code 1\ncat: missing_file.txt: No such file or directory"
    assert [r.command for r in results if r.is_error] == [FAILING]


def test_claude_code_sends_the_same_bytes_through_the_proxy(
    sessions: tuple[Session, Session],
) -> None:
    """What Claude Code sent through mitmdump (each flow's original request,
    its backup) is what it sent directly, byte for byte, but the date and the
    tokens left, which it computes from the provider's usage: through obsmask
    the provider bills fewer tokens, and Claude Code sees more left."""
    direct, proxied = sessions
    flows = _task_flows(proxied)
    assert len(flows) == len(direct.task) == len(proxied.task)
    for number, (flow, served) in enumerate(zip(flows, direct.task, strict=True)):
        original = original_content(flow)
        assert _normalized(original) == _normalized(served.recorded.body), f"request {number}"
        left, direct_left = _tokens_left(original), _tokens_left(served.recorded.body)
        assert len(left) == len(direct_left)
        assert all(p >= d for p, d in zip(left, direct_left, strict=True)), f"request {number}"


def test_the_server_receives_old_bash_results_masked_and_every_other_byte_as_sent(
    sessions: tuple[Session, Session],
) -> None:
    direct, proxied = sessions
    flows = _task_flows(proxied)
    masked_counts = []
    for number, (served, flow, sent_directly) in enumerate(
        zip(proxied.task, flows, direct.task, strict=True)
    ):
        sent_raw = original_content(flow)
        received_raw = served.recorded.body
        assert flow.request.content == received_raw, "the flow holds what was forwarded"
        sent = _body(sent_raw)
        messages = as_list(sent["messages"])

        # The addon's model, on what Claude Code sent through the proxy...
        expected = mask_items(messages, POLICY, ANTHROPIC)
        received = _body(received_raw)
        assert received == {**sent, "messages": expected}, f"request {number}"
        # ... and on what it sent directly (the tokens left and the sizes in
        # the placeholders made equal).
        direct_sent = _body(_normalized(sent_directly.recorded.body))
        direct_masked = {
            **direct_sent,
            "messages": mask_items(as_list(direct_sent["messages"]), POLICY, ANTHROPIC),
        }
        assert _comparable(direct_masked) == _comparable(received), f"request {number}"

        # The window rule, recomputed: the results of the last WINDOW_TURNS
        # tool turns, the failed command's, and those not longer than their
        # placeholder arrive intact; every other one is the placeholder.
        received_messages = as_list(received["messages"])
        results = _results(messages)
        assert [r.turn for r in results] == list(range(number))
        replaced = []
        for result in results:
            got = _value(received_messages, result)
            old = result.turn < number - WINDOW_TURNS
            placeholder = _placeholder(result)
            if not old or result.is_error or len(placeholder) >= len(_text(result.value)):
                assert got == result.value, f"request {number}: {result.command} changed"
                continue
            assert isinstance(result.value, str), "Claude Code sends Bash results as strings"
            assert got == placeholder, f"request {number}: {result.command}"
            replaced.append((result.value, got))
        assert (
            splice_problems(sent_raw.decode("utf-8"), received_raw.decode("utf-8"), replaced) == []
        ), f"request {number}"
        masked_counts.append(len(replaced))

    # Masking starts once a turn leaves the window; on the last request every
    # old result is masked but the failed command's (and wc -l's, when
    # shorter than its placeholder), whatever its age.
    assert masked_counts[: WINDOW_TURNS + 1] == [0] * (WINDOW_TURNS + 1)
    assert all(masked_counts[WINDOW_TURNS + 1 :])
    old_at_last = len(COMMANDS) - WINDOW_TURNS
    assert COMMANDS.index(FAILING) < old_at_last and COMMANDS.index(SMALL) < old_at_last
    assert masked_counts[-1] >= old_at_last - 2
    last = as_list(_body(proxied.task[-1].recorded.body)["messages"])
    [failed] = [r for r in _results(last) if r.is_error]
    assert failed.command == FAILING and _output(failed.value).startswith("Exit code 1")

    # mitmdump said so, request by request.
    logged = [
        (int(m.group(1)), int(m.group(2)))
        for m in re.finditer(
            r"obsmask: POST /v1/messages: masked (\d+) of (\d+) tool results", proxied.log
        )
    ]
    assert logged == [(n, i) for i, n in enumerate(masked_counts) if n]
    assert "Traceback" not in proxied.log
    assert "internal error" not in proxied.log
    assert "forwarded unchanged" not in proxied.log


def test_every_streamed_flow_carries_the_providers_usage(
    sessions: tuple[Session, Session],
) -> None:
    _, proxied = sessions
    messages_flows = [f for f in proxied.flows if urlsplit(f.request.path).path == "/v1/messages"]
    assert len(messages_flows) == len(proxied.served)
    served_by_id = {served.request_id: served for served in proxied.served}
    for flow in messages_flows:
        assert flow.response is not None
        assert flow.response.headers["content-type"].startswith("text/event-stream")
        served = served_by_id[flow.response.headers["request-id"]]
        usage = as_object(served.usage)
        expected = ProviderUsage(
            input_tokens=int(str(usage["input_tokens"])),
            cached_input_tokens=int(str(usage["cache_read_input_tokens"])),
            cache_creation_input_tokens=int(str(usage["cache_creation_input_tokens"])),
            output_tokens=int(str(usage["output_tokens"])),
        )
        summary = as_object(flow.metadata.get("obsmask"))
        assert summary.get("provider_usage") == expected.as_metadata(), flow.request.path
        assert "provider_usage_problem" not in summary
        assert expected.comment_line() in proxied.log


def test_report_figures(sessions: tuple[Session, Session]) -> None:
    """The figures for the README: requests masked, the last request's bytes
    before and after, the provider's usage per request, the run times."""
    direct, proxied = sessions
    flows = _task_flows(proxied)
    masked = [f for f in flows if as_object(f.metadata.get("obsmask")).get("action") == "masked"]
    before = len(original_content(flows[-1]))
    after = len(proxied.task[-1].recorded.body)
    assert after < before

    def prompt(served: Served) -> int:
        usage = as_object(served.usage)
        return sum(
            int(str(usage[k]))
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )

    def billed(session: Session) -> float:
        """Input-token equivalents at Anthropic's prices: cache reads 0.1x,
        cache writes 1.25x (5-minute cache)."""
        total = 0.0
        for served in session.task:
            usage = as_object(served.usage)
            total += int(str(usage["input_tokens"]))
            total += 0.1 * int(str(usage["cache_read_input_tokens"]))
            total += 1.25 * int(str(usage["cache_creation_input_tokens"]))
        return total

    def row(served: Served) -> str:
        usage = as_object(served.usage)
        return (
            f"{usage['input_tokens']} + {usage['cache_read_input_tokens']:,} + "
            f"{usage['cache_creation_input_tokens']:,} = {prompt(served):,}"
        )

    model = _body(direct.task[0].recorded.body)["model"]
    lines = [
        f"Claude Code, model {model} ({direct.model}): {len(COMMANDS)} Bash turns + final "
        f"answer, window {WINDOW_TURNS} tool turns",
        f"run time: direct {direct.run.seconds:.1f} s, through obsmask {proxied.run.seconds:.1f} s",
        f"requests masked: {len(masked)} of {len(flows)}; results masked per request: "
        + " ".join(
            str(as_object(f.metadata.get("obsmask")).get("masked_tool_results", 0)) for f in flows
        ),
        f"last request body: {before:,} bytes sent by Claude Code -> {after:,} bytes received "
        f"({100 * (before - after) / before:.0f}% less)",
        "provider usage per request, input + cache read + cache write = prompt tokens:",
    ]
    for number, (d, p) in enumerate(zip(direct.task, proxied.task, strict=True)):
        lines.append(f"  {number:2d}: direct {row(d)} | through obsmask {row(p)}")
    total_direct = sum(map(prompt, direct.task))
    total_proxied = sum(map(prompt, proxied.task))
    lines.append(
        f"  prompt tokens in all: direct {total_direct:,}, through obsmask {total_proxied:,}"
    )
    lines.append(
        f"  billed with the cache (reads 0.1x, writes 1.25x): direct {billed(direct):,.0f}, "
        f"through obsmask {billed(proxied):,.0f} input-token equivalents"
    )
    print("\n" + "\n".join(lines))
    assert total_proxied < total_direct


# Flows ---------------------------------------------------------------------------------


def _task_flows(session: Session) -> list[http.HTTPFlow]:
    """The flows of the task's requests, in the order the server answered them."""
    return flows_in_answer_order(session.flows, [served.request_id for served in session.task],
                                 "request-id")


# The scripted server on its own --------------------------------------------------------


def _post(url: str, path: str, body: Json) -> tuple[int, str, bytes]:
    request = urllib.request.Request(
        url + path,
        data=compact(body).encode(),
        method="POST",
        headers={"content-type": "application/json"},
    )
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy from env
    try:
        with direct.open(request, timeout=10) as answer:
            return answer.status, answer.headers["content-type"], answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read()


def _rebuilt(stream: bytes) -> Json:
    """The message a client rebuilds from an Anthropic SSE stream."""
    message: Json = {}
    blocks: list[Json] = []
    partial: dict[int, str] = {}
    for kind, data, _ in sse_events(stream):
        event = as_object(json.loads(data))
        assert event["type"] == kind
        if kind == "message_start":
            message = dict(as_object(event["message"]))
        elif kind == "content_block_start":
            blocks.append(dict(as_object(event["content_block"])))
        elif kind == "content_block_delta":
            index, delta = int(str(event["index"])), as_object(event["delta"])
            if delta["type"] == "text_delta":
                blocks[index]["text"] = str(blocks[index]["text"]) + str(delta["text"])
            else:
                partial[index] = partial.get(index, "") + str(delta["partial_json"])
        elif kind == "content_block_stop":
            index = int(str(event["index"]))
            if index in partial:
                blocks[index]["input"] = json.loads(partial[index])
        elif kind == "message_delta":
            message.update(as_object(event["delta"]))
            message["usage"] = {**as_object(message["usage"]), **as_object(event["usage"])}
    return {**message, "content": blocks}


def test_the_scripted_server_answers_as_the_api_does() -> None:
    """Streamed and whole answers agree; the usage is readable by obsmask's
    reader; side requests and unknown routes get plausible answers."""
    bash = {
        "name": "Bash",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
            "required": ["command"],
        },
    }
    task: Json = {
        "model": "m",
        "max_tokens": 100,
        "tools": [bash],
        "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}],
    }
    with scripted_anthropic(PROMPT_MARKER, COMMANDS, FINAL) as server:
        status, kind, stream = _post(server.url, "/v1/messages?beta=true", {**task, "stream": True})
        assert (status, kind) == (200, "text/event-stream; charset=utf-8")
        status, kind, whole = _post(server.url, "/v1/messages", task)
        assert (status, kind) == (200, "application/json")
        streamed, message = _rebuilt(stream), _body(whole)

        def unnamed(message: Json) -> Json:
            return {k: v for k, v in message.items() if k not in ("id", "usage")}

        assert unnamed(streamed) == unnamed(message)
        assert message["stop_reason"] == "tool_use"
        use = as_object(as_list(message["content"])[1])
        assert (use["name"], use["input"]) == (
            "Bash",
            {"command": COMMANDS[0], "description": "Scripted step 1"},
        )
        # obsmask's reader finds the usage of the stream; the same prompt
        # again is read from the cache.
        usage = as_object(streamed["usage"])
        assert read_usage([stream]).usage == ProviderUsage(
            input_tokens=int(str(usage["input_tokens"])),
            cached_input_tokens=int(str(usage["cache_read_input_tokens"])),
            cache_creation_input_tokens=int(str(usage["cache_creation_input_tokens"])),
            output_tokens=int(str(usage["output_tokens"])),
        )
        again = as_object(message["usage"])
        assert usage["cache_read_input_tokens"] == again["cache_creation_input_tokens"] == 0
        prompt = int(str(usage["input_tokens"])) + int(str(usage["cache_creation_input_tokens"]))
        assert again["cache_read_input_tokens"] == prompt
        side = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "t"}]}
        status, _, title = _post(server.url, "/v1/messages", side)
        assert status == 200 and as_list(_body(title)["content"])[0] == {
            "type": "text",
            "text": "Scripted side answer.",
        }
        status, _, count = _post(server.url, "/v1/messages/count_tokens", side)
        assert status == 200 and int(str(_body(count)["input_tokens"])) > 0
        status, _, missing = _post(server.url, "/v1/other", side)
        assert status == 404 and _body(missing)["type"] == "error"
        assert [s.kind for s in server.served] == [
            "task",
            "task",
            "other",
            "count_tokens",
            "unknown",
        ]
        assert [s.step for s in server.task()] == [0, 0]
